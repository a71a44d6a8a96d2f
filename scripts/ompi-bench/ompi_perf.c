/*
 * ompi_perf: the MPI side of scripts/compare-ompi.sh. It times MPI_Allreduce,
 * MPI_Reduce_scatter_block and MPI_Allgather on float with sum the way
 * nccl-tests (v2.19.6) times NCCL, and prints nccl-tests' table, so that one
 * parser reads both its output and cc-perf's:
 *
 *   mpicc -O2 -o ompi_perf scripts/ompi-bench/ompi_perf.c
 *   mpirun -np 2 ./ompi_perf all_reduce -b 8 -e 64M -f 2 -w 5 -n 20 -c 1
 *
 * What follows nccl-tests (see shared/reference/anchor-benchmarks-launchers.md,
 * sections 2 and 3):
 *  - sizes: -b to -e, times -f when -f > 1, else plus -i; count = size / 4.
 *    all_reduce moves count floats; reduce_scatter and all_gather a per-rank
 *    block of base = count / nranks rounded down to a multiple of 4 floats
 *    (16 bytes), so their size column is base * nranks * 4 and their count
 *    column is base (1000 floats over 3 ranks: base 332, size 3984).
 *  - time: every size class (min, 2 x min, ... max) is warmed up -w times
 *    first; each half-row is one untimed call, a barrier, then -n calls
 *    timed together; the time is their mean, averaged over the ranks.
 *  - buffers: they hold -e bytes, and the n-th call of a half (warmup and
 *    timed) uses region n mod (maxbytes / the call's larger side), as
 *    nccl-tests shifts its buffers (and cc-perf does), so that both tools
 *    stream the same memory: a call much smaller than -e does not find its
 *    data in the caches (until 2026-11-28 this tool reused one region,
 *    which made a 1 MiB all-gather of cc-perf's 2-2.5x slower than the
 *    same call on one region, against Open MPI's on one region).
 *  - algbw = bytes / 1e9 / seconds; busbw = algbw x 2(n-1)/n for all_reduce
 *    and x (n-1)/n for reduce_scatter and all_gather.
 *  - #wrong: after timing, -c checks per half (the receive buffer zeroed
 *    first) count the wrong elements over all ranks. Inputs are small
 *    integers in floats, so every summation order gives the same exact sum
 *    and the check compares for equality.
 *  - exit status 7 when any element was wrong.
 *
 * In place is MPI_IN_PLACE, with MPI's layout: all_gather's input is the
 * rank's own block of the receive buffer (as in NCCL); reduce_scatter's
 * result lands at the start of the buffer, not at block rank as in NCCL.
 *
 * Only rank 0 prints. There are no GPUs: the device column shows each rank's
 * CPU affinity and the CPU model, as cc-perf does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VERSION "2.19.6+ompi_perf"

enum coll { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER };

static const struct {
	const char *name;
	enum coll coll;
} colls[] = {
	{"all_reduce", ALL_REDUCE},
	{"reduce_scatter", REDUCE_SCATTER},
	{"all_gather", ALL_GATHER},
};

struct opts {
	enum coll coll;
	const char *name;
	long minbytes, maxbytes, stepbytes, stepfactor;
	int warmup, iters, check;
};

/* One run's state on one rank. */
struct bench {
	struct opts o;
	int rank, nranks;
	float *send, *recv, *want;
	long count, base; /* elements for this size: whole, per-rank block */
	long bytes;       /* the size column */
	long oob;         /* halves with a wrong element on this rank */
	double bwsum;     /* busbw over every printed half */
	long bwcount;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s all_reduce|reduce_scatter|all_gather [flags]\n"
		"  -b, minbytes    smallest size, K/M/G suffixes (default 32M)\n"
		"  -e, maxbytes    largest size (default 32M)\n"
		"  -i, stepbytes   step added to the size when -f <= 1 (default 1M)\n"
		"  -f, stepfactor  factor the size is multiplied by (default 1: use -i)\n"
		"  -w, warmup      warmup iterations per size class (default 1)\n"
		"  -n, iters       timed iterations per half-row (default 20)\n"
		"  -c, check       data checks per half-row, 0 = none (default 1)\n"
		"  -h              this help\n",
		prog);
}

/* parsesize reads nccl-tests' sizes: a number, optionally fractional, with
 * an optional K, M or G (powers of 1024), e.g. "8", "64M", "0.5k". */
static int parsesize(const char *s, long *out)
{
	double v;
	char unit[2] = "";
	int n = sscanf(s, "%lf %1s", &v, unit);
	if (n < 1 || v < 0)
		return -1;
	switch (unit[0]) {
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	case 'M': case 'm': v *= 1024.0 * 1024; break;
	case 'K': case 'k': v *= 1024.0; break;
	case '\0': break;
	default: return -1;
	}
	*out = (long)v;
	return 0;
}

static int parseint(const char *s, long lo, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || v < lo)
		return -1;
	*out = v;
	return 0;
}

/* parse fills o from argv; it returns 0 to run, 1 after -h, -1 on bad usage
 * (with a message on stderr). */
static int parse(int argc, char **argv, struct opts *o, int say)
{
	*o = (struct opts){.minbytes = 32L << 20, .maxbytes = 32L << 20, .stepbytes = 1L << 20,
		.stepfactor = 1, .warmup = 1, .iters = 20, .check = 1};
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		if (say)
			usage(argc < 2 ? stderr : stdout, argv[0]);
		return argc < 2 ? -1 : 1;
	}
	o->name = NULL;
	for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
		if (strcmp(argv[1], colls[i].name) == 0)
			o->name = colls[i].name, o->coll = colls[i].coll;
	if (!o->name) {
		if (say)
			fprintf(stderr, "%s: unknown collective %s: want all_reduce, reduce_scatter or all_gather\n", argv[0], argv[1]);
		return -1;
	}
	for (int i = 2; i < argc; i++) {
		const char *f = argv[i];
		if (strcmp(f, "-h") == 0) {
			if (say)
				usage(stdout, argv[0]);
			return 1;
		}
		if (f[0] != '-' || f[1] == '\0' || f[2] != '\0' || i + 1 >= argc || !strchr("beifwnc", f[1])) {
			if (say)
				fprintf(stderr, "%s: bad flag %s: want one of -b -e -i -f -w -n -c, each with a value\n", argv[0], f);
			return -1;
		}
		const char *v = argv[++i];
		long n = 0;
		int bad;
		switch (f[1]) {
		case 'b': bad = parsesize(v, &o->minbytes); break;
		case 'e': bad = parsesize(v, &o->maxbytes); break;
		case 'i': bad = parsesize(v, &o->stepbytes); break;
		case 'f': bad = parseint(v, 0, &o->stepfactor); break;
		case 'w': bad = parseint(v, 0, &n); o->warmup = (int)n; break;
		case 'n': bad = parseint(v, 1, &n); o->iters = (int)n; break;
		default: bad = parseint(v, 0, &n); o->check = (int)n; break;
		}
		if (bad) {
			if (say)
				fprintf(stderr, "%s: invalid value %s for %s\n", argv[0], v, f);
			return -1;
		}
	}
	if (o->minbytes > o->maxbytes) {
		if (say)
			fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %ld > %ld\n", o->minbytes, o->maxbytes);
		return -1;
	}
	if (o->stepfactor <= 1 && o->stepbytes <= 0) {
		if (say)
			fprintf(stderr, "%s: -i must be positive when -f <= 1\n", argv[0]);
		return -1;
	}
	if (o->stepfactor > 1 && o->minbytes == 0)
		o->minbytes = 4; /* a factor never leaves 0 */
	return 0;
}

/* setsize sets the counts of one row, as nccl-tests' GetCollByteCount. */
static void setsize(struct bench *b, long size)
{
	b->count = size / (long)sizeof(float);
	b->base = (b->count / b->nranks) & ~3L; /* 16-byte blocks */
	b->bytes = b->o.coll == ALL_REDUCE ? b->count * 4 : b->base * b->nranks * 4;
}

static double busfactor(const struct bench *b)
{
	double n = b->nranks;
	return b->o.coll == ALL_REDUCE ? 2 * (n - 1) / n : (n - 1) / n;
}

/* value is rank r's input at element g of the whole (all_reduce,
 * reduce_scatter) or of its own block (all_gather): an integer in -4..4. */
static float value(int r, long g, unsigned seed)
{
	uint64_t h = (uint64_t)g * 0x9e3779b97f4a7c15ULL + (uint64_t)r * 0xbf58476d1ce4e5b9ULL + seed;
	h ^= h >> 31;
	return (float)((int)(h % 9) - 4);
}

/* sendlen and recvlen are the buffer lengths in elements of a call. */
static long sendlen(const struct bench *b)
{
	return b->o.coll == ALL_REDUCE ? b->count : b->o.coll == REDUCE_SCATTER ? b->base * b->nranks : b->base;
}

static long recvlen(const struct bench *b)
{
	return b->o.coll == ALL_REDUCE ? b->count : b->o.coll == REDUCE_SCATTER ? b->base : b->base * b->nranks;
}

/* input returns the buffer a call reads: send, or for in-place the part of
 * recv MPI reads (all of it, or all_gather's block rank). */
static float *input(struct bench *b, int inplace)
{
	if (!inplace)
		return b->send;
	return b->o.coll == ALL_GATHER ? b->recv + (long)b->rank * b->base : b->recv;
}

/* fill writes this rank's input for seed and, when want is set, the
 * expected result into b->want; the receive buffer is zeroed first. */
static void fill(struct bench *b, int inplace, unsigned seed, int want)
{
	long in = sendlen(b), out = recvlen(b);
	if (inplace && b->o.coll == REDUCE_SCATTER)
		out = in; /* the whole input lives in recv */
	memset(b->recv, 0, (size_t)out * sizeof(float));
	float *x = input(b, inplace);
	for (long i = 0; i < in; i++)
		x[i] = value(b->rank, i, seed);
	if (!want)
		return;
	switch (b->o.coll) {
	case ALL_REDUCE:
		for (long i = 0; i < b->count; i++) {
			float s = 0;
			for (int r = 0; r < b->nranks; r++)
				s += value(r, i, seed);
			b->want[i] = s;
		}
		break;
	case REDUCE_SCATTER:
		for (long i = 0; i < b->base; i++) {
			float s = 0;
			for (int r = 0; r < b->nranks; r++)
				s += value(r, (long)b->rank * b->base + i, seed);
			b->want[i] = s;
		}
		break;
	case ALL_GATHER:
		for (int r = 0; r < b->nranks; r++)
			for (long i = 0; i < b->base; i++)
				b->want[(long)r * b->base + i] = value(r, i, seed);
		break;
	}
}

/* wrong counts the elements of the result that differ from b->want. */
static long wrong(const struct bench *b)
{
	long n = 0, len = recvlen(b);
	for (long i = 0; i < len; i++)
		n += b->recv[i] != b->want[i];
	return n;
}

/* Regions: as in nccl-tests (and cc-perf), successive calls of a size use
 * successive regions of the -e-sized buffers, maxbytes / (the call's larger
 * side) of them, so that a size much below -e does not find its data in the
 * caches the call before left it in. The synchronising call and the checks
 * use region 0. A loop steps through them with nextregion, which adds, so
 * that the timed loop pays no division per call (cc-perf's does not). */
struct regions {
	long len, end; /* elements per region; where the regions end */
};

static struct regions regionsof(const struct bench *b)
{
	long len = sendlen(b) > recvlen(b) ? sendlen(b) : recvlen(b);
	long n = len > 0 ? b->o.maxbytes / (len * (long)sizeof(float)) : 1;
	return (struct regions){.len = len, .end = len * (n > 1 ? n : 1)};
}

/* nextregion returns the offset, in elements, of the region after off's. */
static long nextregion(const struct regions *r, long off)
{
	off += r->len;
	return off >= r->end ? 0 : off;
}

/* call runs one call of the current size on the buffers at off elements. */
static void call(struct bench *b, int inplace, long off)
{
	int rc;
	float *send = b->send + off, *recv = b->recv + off;
	const void *in = inplace ? MPI_IN_PLACE : send;
	switch (b->o.coll) {
	case ALL_REDUCE:
		rc = MPI_Allreduce(in, recv, (int)b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case REDUCE_SCATTER:
		rc = MPI_Reduce_scatter_block(in, recv, (int)b->base, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	default:
		rc = inplace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)b->base, MPI_FLOAT, MPI_COMM_WORLD)
			     : MPI_Allgather(send, (int)b->base, MPI_FLOAT, recv, (int)b->base, MPI_FLOAT, MPI_COMM_WORLD);
	}
	if (rc != MPI_SUCCESS) { /* the default handler aborts first; kept for others */
		fprintf(stderr, "rank %d: %s of %ld bytes failed with MPI error %d\n", b->rank, b->o.name, b->bytes, rc);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* floatstr is nccl-tests' getFloatStr: the first of %.2f, %.1f, %.0f that
 * fits in w characters, else %.1e (w >= 7) or %.0e. */
static const char *floatstr(char *buf, size_t len, double v, int w)
{
	for (int prec = 2; prec >= 0; prec--)
		if (snprintf(buf, len, "%*.*f", w, prec, v) <= w)
			return buf;
	snprintf(buf, len, "%*.*e", w, w >= 7 ? 1 : 0, v);
	return buf;
}

/* half times one half of a row and prints it on rank 0. */
static void half(struct bench *b, int inplace)
{
	if (b->o.check > 0)
		fill(b, inplace, 99, 0);
	call(b, inplace, 0); /* one call to synchronise, then a barrier */
	MPI_Barrier(MPI_COMM_WORLD);
	struct regions r = regionsof(b);
	long off = 0;
	double t0 = MPI_Wtime();
	for (int it = 0; it < b->o.iters; it++) {
		call(b, inplace, off);
		off = nextregion(&r, off);
	}
	double sec = (MPI_Wtime() - t0) / b->o.iters;
	MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	sec /= b->nranks;
	MPI_Barrier(MPI_COMM_WORLD);

	long nwrong = 0;
	for (int c = 0; c < b->o.check; c++) {
		fill(b, inplace, (unsigned)(1000 + c), 1);
		call(b, inplace, 0);
		long local = wrong(b);
		if (local > 0)
			b->oob++;
		MPI_Allreduce(&local, &nwrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (nwrong > 0)
			break;
	}

	double algbw = sec > 0 ? (double)b->bytes / 1e9 / sec : 0;
	double busbw = algbw * busfactor(b);
	b->bwsum += busbw;
	b->bwcount++;
	if (b->rank != 0)
		return;
	char t[32], a[32], u[32];
	printf("  %7s  %6s  %6s", floatstr(t, sizeof t, sec * 1e6, 7), floatstr(a, sizeof a, algbw, 6),
	       floatstr(u, sizeof u, busbw, 6));
	if (b->o.check > 0)
		printf("  %6g", (double)nwrong);
	else
		printf("    N/A");
}

static void row(struct bench *b, long size)
{
	setsize(b, size);
	if (b->rank == 0) {
		printf("%12ld  %12ld  %8s  %6s  %6i", b->bytes, b->o.coll == ALL_REDUCE ? b->count : b->base, "float",
		       b->o.coll == ALL_GATHER ? "none" : "sum", -1);
		fflush(stdout); /* a hang shows where it is */
	}
	half(b, 0);
	half(b, 1);
	if (b->rank == 0) {
		printf("\n");
		fflush(stdout);
	}
}

/* A rank's line of the device listing. */
struct device {
	int pid;
	char host[64], cpus[128], model[128];
};

static void describe(struct device *d)
{
	memset(d, 0, sizeof *d);
	d->pid = (int)getpid();
	gethostname(d->host, sizeof d->host - 1);
	char *dot = strchr(d->host, '.');
	if (dot)
		*dot = '\0';
	strcpy(d->cpus, "cpu ?");
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		size_t n = (size_t)snprintf(d->cpus, sizeof d->cpus, "cpu ");
		for (int c = 0; c < CPU_SETSIZE && n < sizeof d->cpus; c++) {
			if (!CPU_ISSET(c, &set))
				continue;
			int e = c;
			while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
				e++;
			const char *sep = n > 4 ? "," : "";
			n += (size_t)(e > c ? snprintf(d->cpus + n, sizeof d->cpus - n, "%s%d-%d", sep, c, e)
					    : snprintf(d->cpus + n, sizeof d->cpus - n, "%s%d", sep, c));
			c = e;
		}
	}
	strcpy(d->model, "cpu");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	while (f && fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) != 0 || !colon)
			continue;
		/* squeeze blanks, as cc-perf does */
		size_t n = 0;
		for (char *p = colon + 1; *p && n + 1 < sizeof d->model; p++) {
			int blank = *p == ' ' || *p == '\t' || *p == '\n';
			if (!blank)
				d->model[n++] = *p;
			else if (n > 0 && d->model[n - 1] != ' ')
				d->model[n++] = ' ';
		}
		while (n > 0 && d->model[n - 1] == ' ')
			n--;
		d->model[n] = '\0';
		break;
	}
	if (f)
		fclose(f);
}

static void header(const struct bench *b)
{
	struct device me, *all = NULL;
	describe(&me);
	if (b->rank == 0)
		all = calloc((size_t)b->nranks, sizeof me);
	MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (b->rank != 0)
		return;
	const struct opts *o = &b->o;
	printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", VERSION, 0, 0);
	printf("# Collective test starting: %s_perf\n", o->name);
	printf("# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
	       1, 1, o->minbytes, o->maxbytes, o->stepfactor > 1 ? o->stepfactor : o->stepbytes,
	       o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, 1, o->check, 0, 0);
	printf("#\n# Using devices\n");
	for (int r = 0; r < b->nranks; r++)
		printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r, 0, all[r].pid, all[r].host, r,
		       all[r].cpus, all[r].model);
	free(all);
	printf("#\n");
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop",
	       "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
	       "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, "");
	fflush(stdout);
}

static void *alloc(long floats, int rank)
{
	void *p = NULL;
	size_t n = (size_t)(floats > 0 ? floats : 1) * sizeof(float);
	if (posix_memalign(&p, 4096, n) != 0) {
		fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", rank, n);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(p, 0, n); /* touch every page before timing */
	return p;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	struct bench b = {0};
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
	int rc = parse(argc, argv, &b.o, b.rank == 0);
	if (rc != 0) {
		MPI_Finalize();
		return rc > 0 ? 0 : 2;
	}
	/* Buffers for the largest size: every collective's send and receive
	 * length is at most count elements. */
	long most = b.o.maxbytes / (long)sizeof(float);
	b.send = alloc(most, b.rank);
	b.recv = alloc(most, b.rank);
	b.want = alloc(most, b.rank);

	header(&b);
	/* Warm up every size class: min, 2 x min, ... max. */
	for (long size = b.o.minbytes; size <= b.o.maxbytes; size = size > 0 ? size * 2 : 1) {
		setsize(&b, size);
		struct regions r = regionsof(&b);
		long off = 0;
		for (int it = 0; it < b.o.warmup; it++) {
			call(&b, 0, off);
			off = nextregion(&r, off);
		}
	}
	for (long size = b.o.minbytes; size <= b.o.maxbytes;) {
		row(&b, size);
		long next = b.o.stepfactor > 1 ? size * b.o.stepfactor : size + b.o.stepbytes;
		if (next <= size)
			break;
		size = next;
	}

	long oob = 0;
	double bw[2] = {b.bwsum, (double)b.bwcount};
	MPI_Reduce(&b.oob, &oob, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (b.rank == 0) {
		printf("# %-20s : %ld %s\n", "Out of bounds values", oob, oob ? "FAILED" : "OK");
		printf("# %-20s : %g %s\n", "Avg bus bandwidth", bw[1] > 0 ? bw[0] / bw[1] : 0.0, "");
		printf("#\n# Collective test concluded: %s_perf\n#\n\n", b.o.name);
		fflush(stdout);
	}
	MPI_Bcast(&oob, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	free(b.send);
	free(b.recv);
	free(b.want);
	MPI_Finalize();
	return oob ? 7 : 0;
}
