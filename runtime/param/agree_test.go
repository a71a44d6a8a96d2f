package param

import (
	"fmt"
	"strings"
	"testing"
)

func loadMap(t *testing.T, env map[string]string) *Params {
	t.Helper()
	p, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDisagreement(t *testing.T) {
	where := func(r int) string { return fmt.Sprintf("host-%d", r) }
	for _, tc := range []struct {
		a, b map[string]string
		want string // "" = agree
	}{
		{map[string]string{}, map[string]string{}, ""},
		{map[string]string{"NCCL_ALGO": "Ring"}, map[string]string{"NCCL_ALGO": "ring"}, ""},
		{map[string]string{"NCCL_BUFFSIZE": "4194304"}, map[string]string{}, ""}, // the default, explicitly
		{map[string]string{"NCCL_DEBUG": "INFO"}, map[string]string{}, ""},       // may differ
		{map[string]string{"NCCL_ALGO": "tree"}, map[string]string{"NCCL_ALGO": "ring"},
			`NCCL_ALGO differs between ranks: "tree" on rank 0 (host-0), "ring" on rank 1 (host-1): every rank of a job must use the same value`},
		{map[string]string{"NCCL_ALGO": "tree"}, map[string]string{},
			`NCCL_ALGO differs between ranks: "tree" on rank 0 (host-0), unset on rank 1 (host-1)`},
		{map[string]string{}, map[string]string{"NCCL_BUFFSIZE": "1048576"},
			`NCCL_BUFFSIZE differs between ranks: unset (4194304) on rank 0 (host-0), "1048576" on rank 1 (host-1)`},
		{map[string]string{"NCCL_NCHANNELS": "2"}, map[string]string{},
			`NCCL_NCHANNELS/NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS differs between ranks: "NCCL_NCHANNELS=2" on rank 0 (host-0), unset on rank 1`},
		{map[string]string{}, map[string]string{"NCCL_SHM_DISABLE": "1"}, `NCCL_SHM_DISABLE differs between ranks`},
		{map[string]string{"NCCL_PROTO": "^LL"}, map[string]string{"NCCL_PROTO": "LL128,Simple"}, ""},
		{map[string]string{"NCCL_CTRAN_ALLREDUCE_RING_BIDIR_AG_MAX_SIZE": "0"}, map[string]string{},
			`NCCL_CTRAN_ALLREDUCE_RING_*/CC_CTRING_ARCH differs between ranks: "NCCL_CTRAN_ALLREDUCE_RING_BIDIR_AG_MAX_SIZE=0" on rank 0 (host-0), unset on rank 1`},
		{map[string]string{"CC_CTRING_ARCH": "hopper"}, map[string]string{}, ""}, // the default, explicitly
	} {
		texts := [][]byte{loadMap(t, tc.a).AgreedText(), loadMap(t, tc.b).AgreedText(), loadMap(t, tc.a).AgreedText()}
		err := Disagreement(texts, where)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v vs %v: %v, want agreement", tc.a, tc.b, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v vs %v: %v, want an error containing %q", tc.a, tc.b, err, tc.want)
		}
	}
}
