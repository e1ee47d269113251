/* Counts heap allocations: every entry point that returns new memory (malloc, calloc, realloc,
 * posix_memalign, aligned_alloc, memalign, valloc), whoever calls it: gmlp, libstdc++'s operator
 * new, oneDNN, libgomp. Two uses:
 *  - from outside, LD_PRELOAD=alloc_counter.so gmlp ..., which prints "allocations N" on stderr at
 *    exit (bench/alloc_per_step.sh);
 *  - linked into a test program, which reads the count with gmlp_allocations() (tests/alloc_test.cpp)
 *    and sets GMLP_ALLOC_QUIET to keep the exit line out of its output. */
#define _GNU_SOURCE /* NOLINT(bugprone-reserved-identifier): glibc's switch for its extensions */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* glibc's own allocator, under the reserved names it exports, to which the counting versions pass on. */
/* NOLINTBEGIN(bugprone-reserved-identifier) */
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
/* NOLINTEND(bugprone-reserved-identifier) */

static atomic_long count;

void* malloc(size_t n) { atomic_fetch_add(&count, 1); return __libc_malloc(n); }
void* calloc(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_calloc(a, n); }
void* realloc(void* p, size_t n) { atomic_fetch_add(&count, 1); return __libc_realloc(p, n); }
void* memalign(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
void* aligned_alloc(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
void* valloc(size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n); }
int posix_memalign(void** p, size_t a, size_t n) {
  atomic_fetch_add(&count, 1);
  *p = __libc_memalign(a, n);
  return *p || n == 0 ? 0 : 12; /* ENOMEM */
}

long gmlp_allocations(void) { return atomic_load(&count); }

__attribute__((destructor)) static void report(void) {
  if (!getenv("GMLP_ALLOC_QUIET")) fprintf(stderr, "allocations %ld\n", (long)atomic_load(&count));
}
