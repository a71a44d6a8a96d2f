# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # its variables (out, cc_desc, repo, ...) belong to the sourcing script
# sweep-flags.sh: the flags that scripts/tune-check.sh and
# scripts/compare-ompi.sh share, sourced by both (not run on its own).
#
# The sourcing script defines usage() and die() and sets the defaults of
# reps iters warmup minbytes maxbytes factor configs colls out run_timeout,
# then calls
#
#   sweep_parse "$@"              # the flags into those variables (-h: usage)
#   sweep_check "a b c"           # checks them, with the collectives allowed;
#                                 # fills config_list and coll_list
#   cc_build DIR NAME             # cc_bin, cc_desc: CC_BIN, or ccrun and cc-perf
#                                 # built from this tree into DIR

# sweep_parse reads the flags; an unknown one or a missing value is die's.
sweep_parse() {
  local flag val
  while [ $# -gt 0 ]; do
    flag=$1
    case $flag in
    -h | --help)
      usage
      exit 0
      ;;
    -r | --reps | -n | --iters | -w | --warmup | -b | --minbytes | -e | --maxbytes | -f | --stepfactor | \
      --configs | --colls | --out | --timeout)
      [ $# -ge 2 ] || die "$flag needs a value (see -h)"
      val=$2
      shift 2
      ;;
    *) die "unknown flag $flag (see -h)" ;;
    esac
    case $flag in
    -r | --reps) reps=$val ;;
    -n | --iters) iters=$val ;;
    -w | --warmup) warmup=$val ;;
    -b | --minbytes) minbytes=$val ;;
    -e | --maxbytes) maxbytes=$val ;;
    -f | --stepfactor) factor=$val ;;
    --configs) configs=$val ;;
    --colls) colls=$val ;;
    --out) out=$val ;;
    --timeout) run_timeout=$val ;;
    esac
  done
}

# natural FLAG VALUE MIN: VALUE is a whole number >= MIN, or die.
natural() {
  if ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ]; then die "$1 $2: want a whole number >= $3"; fi
}

# sweep_check "ALLOWED COLLECTIVES": the values are usable; splits the lists.
sweep_check() {
  local allowed=$1 c s
  natural --reps "$reps" 1
  natural --iters "$iters" 1
  natural --warmup "$warmup" 0
  natural --stepfactor "$factor" 2
  natural --timeout "$run_timeout" 0
  for s in "$minbytes" "$maxbytes"; do
    [[ $s =~ ^[0-9]+[KkMmGg]?$ ]] || die "size $s: want a whole number of bytes with an optional K, M or G"
  done
  IFS=, read -ra config_list <<<"$configs"
  IFS=, read -ra coll_list <<<"$colls"
  [ ${#config_list[@]} -gt 0 ] || die "--configs is empty: want some of shm2,shm4,tcp2"
  [ ${#coll_list[@]} -gt 0 ] || die "--colls is empty: want some of ${allowed// /,}"
  for c in "${config_list[@]}"; do
    case $c in shm2 | shm4 | tcp2) ;; *) die "--configs: unknown configuration $c: want shm2, shm4 or tcp2" ;; esac
  done
  for c in "${coll_list[@]}"; do
    [[ " $allowed " == *" $c "* ]] || die "--colls: unknown collective $c: want one of ${allowed// /, }"
  done
}

# cc_build DIR NAME: cc_bin is $CC_BIN, or DIR after building ccrun and
# cc-perf from this tree into it (NAME says who builds); cc_desc says which.
cc_build() {
  cc_bin=${CC_BIN:-}
  cc_desc=$cc_bin
  [ -z "$cc_bin" ] || return 0
  local go=go
  command -v go >/dev/null || go=/usr/local/go/bin/go
  echo "$2: building ccrun and cc-perf with $go build into $1" >&2
  (cd "$repo" && "$go" build -o "$1/" ./cmd/ccrun ./cmd/cc-perf)
  cc_bin=$1
  cc_desc="built from $repo at $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(not a git tree)')"
}
