/* A caching allocator for the data of numpy arrays made on the interpreter's worker thread.
 *
 * Why: the worker thread allocates from its own glibc arena, whose top is trimmed (pages
 * handed back with MADV_DONTNEED) whenever enough of it is free. A training step frees and
 * reallocates the same large buffers every step, so each step paid to fault ~10 MB of pages
 * back in (2,500 faults, 6-13 ms of system time in a 100 ms MLP step). Blocks of
 * POOL_MIN_BLOCK bytes or more are kept here instead, by exact size (a step asks for the same
 * sizes again), up to a byte limit; smaller ones go to malloc as before. Under a memory
 * budget the cache also keeps to the budget (cache_room).
 *
 * It is installed with numpy's NEP 49 handler API in the worker thread's context only, so
 * the user's own arrays are untouched. A block may be freed on any thread: a mutex guards
 * the lists. Each block carries a 64-byte header holding its size and its links (numpy's
 * realloc does not pass the old size), which keeps the data 64-byte aligned.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "_pool.h"

#define HEADER 64
#define POOL_MIN_BLOCK (256 << 10)
#define BUCKETS 64

/* The header of a block (it fits in HEADER bytes). */
typedef struct block {
    size_t size;                 /* bytes the caller asked for */
    struct block *prev, *next;   /* in its bucket, while cached */
    struct block *older, *newer; /* in the order the cache took the blocks, while cached */
    void *raw;                   /* what malloc returned (the block is aligned within it) */
} block;

/* A block of `total` bytes aligned to 64 from plain malloc: glibc's aligned_alloc asks
 * malloc for more than the block (the alignment and a chunk), so that a freed block never
 * fitted the next one of its size and the heap grew (and faulted pages in) for each. */
static block *new_block(size_t total)
{
    void *raw = malloc(total + 64);
    if (!raw) return NULL;
    block *b = (block *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    b->raw = raw;
    return b;
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static block *buckets[BUCKETS];
static block *oldest, *newest;
static size_t cached_bytes, cache_limit = 64 << 20;
static unsigned long long hits, misses;
static size_t in_use;           /* bytes of large blocks handed out and not yet freed */
static size_t in_use_highest;   /* the most in_use has been since the reserve was set */
static size_t reserve_limit;    /* 0, or the memory budget (see cache_room) */

/* How much may stay cached now (the lock is held). Under a memory budget, the blocks handed
 * out plus those cached stay within the budget, or within the most the blocks handed out
 * have reached where that is more (a budget under the floor): the process's memory then
 * follows the budget, and a freed block is cached whenever the memory it takes would be
 * taken again anyway. A miss that passes the bound frees the oldest cached blocks, whose
 * memory malloc then hands out at once instead of faulting fresh pages in. */
static size_t cache_room(void)
{
    if (!reserve_limit) return cache_limit;
    size_t bound = reserve_limit > in_use_highest ? reserve_limit : in_use_highest;
    size_t left = bound > in_use ? bound - in_use : 0;
    return left < cache_limit ? left : cache_limit;
}

static void hand_out(size_t size)
{
    in_use += size;
    if (in_use > in_use_highest) in_use_highest = in_use;
}

static size_t bucket_of(size_t size) { return (size >> 12) % BUCKETS; }

/* Take a cached block out of its bucket and out of the age order (the lock is held). */
static void uncache(block *b)
{
    size_t i = bucket_of(b->size);
    if (b->prev) b->prev->next = b->next; else buckets[i] = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->older) b->older->newer = b->newer; else oldest = b->newer;
    if (b->newer) b->newer->older = b->older; else newest = b->older;
    cached_bytes -= b->size;
}

/* Uncache the oldest blocks until at most `keep` bytes stay cached; they are returned as a
 * list through `next`, to be freed once the lock is released (the lock is held). */
static block *evict_oldest(size_t keep)
{
    block *freed = NULL;
    while (cached_bytes > keep && oldest) {
        block *b = oldest;
        uncache(b);
        b->next = freed;
        freed = b;
    }
    return freed;
}

static void free_list(block *b)
{
    while (b) {
        block *next = b->next;
        free(b->raw);
        b = next;
    }
}

static void *pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= POOL_MIN_BLOCK) {
        pthread_mutex_lock(&pool_lock);
        for (block *b = buckets[bucket_of(size)]; b; b = b->next)
            if (b->size == size) {
                uncache(b);
                hand_out(size);
                hits++;
                pthread_mutex_unlock(&pool_lock);
                return (char *)b + HEADER;
            }
        misses++;
        hand_out(size);
        block *freed = evict_oldest(cache_room());
        pthread_mutex_unlock(&pool_lock);
        free_list(freed);
    }
    size_t total = (size + HEADER + 63) / 64 * 64;
    block *b = new_block(total);
    if (!b) {
        if (size >= POOL_MIN_BLOCK) {
            pthread_mutex_lock(&pool_lock);
            in_use -= size;
            pthread_mutex_unlock(&pool_lock);
        }
        return NULL;
    }
    b->size = size;
    return (char *)b + HEADER;
}

static void pool_free(void *ctx, void *ptr, size_t size_hint)
{
    (void)ctx;
    (void)size_hint;
    if (!ptr) return;
    block *b = (block *)((char *)ptr - HEADER);
    if (b->size >= POOL_MIN_BLOCK) {
        pthread_mutex_lock(&pool_lock);
        in_use -= b->size;
        /* (when the cache is full the new block goes, not the old ones: handing the old
         * ones to malloc instead faulted more pages in and left the process 20% larger) */
        if (cached_bytes + b->size <= cache_room()) {
            size_t i = bucket_of(b->size);
            b->prev = NULL;
            b->next = buckets[i];
            if (b->next) b->next->prev = b;
            buckets[i] = b;
            b->newer = NULL;
            b->older = newest;
            if (newest) newest->newer = b; else oldest = b;
            newest = b;
            cached_bytes += b->size;
            pthread_mutex_unlock(&pool_lock);
            return;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    free(b->raw);
}

static void *pool_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize && nelem > (size_t)-1 / elsize) return NULL;
    void *p = pool_malloc(ctx, nelem * elsize);
    if (p) memset(p, 0, nelem * elsize);
    return p;
}

static void *pool_realloc(void *ctx, void *ptr, size_t new_size)
{
    if (!ptr) return pool_malloc(ctx, new_size);
    size_t old = ((block *)((char *)ptr - HEADER))->size;
    void *p = pool_malloc(ctx, new_size);
    if (!p) return NULL;
    memcpy(p, ptr, old < new_size ? old : new_size);
    pool_free(ctx, ptr, old);
    return p;
}

static PyDataMem_Handler pool_handler = {
    "imperative_worker_pool",
    1,
    {NULL, pool_malloc, pool_calloc, pool_realloc, pool_free},
};

static PyObject *pool_capsule;

/* Let glibc keep freed memory mapped for reuse, unless the user tuned malloc: arrays under
 * 32 MiB come from the heap, whose top is handed back past 64 MiB free (the most glibc's
 * own dynamic thresholds grow to), or past twice the budget under a larger memory budget
 * (`budget` bytes; 0: none). Setting a budget first hands back what malloc holds free
 * (malloc_trim), so that the process's memory falls with the budget. Why: the dynamic
 * thresholds start at 128 KiB and trim the top past twice the largest block mmap'd so far,
 * and what the block cache cannot keep (past its limit, or past the budget) went back to
 * the system and was faulted in again at the next allocation: the zoo's CNN with Adam
 * faulted 2,700-4,100 pages a step unconstrained (6 ms of system time in a 22-28 ms step;
 * now none, the step 20 ms), a DenseNet 1,600; under a budget of 0.5 P a transformer
 * 2,100-3,100, a U-Net up to 3,000. */
static void size_malloc_for(size_t budget)
{
#ifdef __GLIBC__
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_MMAP_THRESHOLD_")
            || getenv("MALLOC_TOP_PAD_") || (tunables && strstr(tunables, "malloc.")))
        return;
    size_t keep = budget > ((size_t)32 << 20) ? 2 * budget : (size_t)64 << 20;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, keep < (size_t)INT_MAX ? (int)keep : INT_MAX);
    if (budget) malloc_trim(0);
#else
    (void)budget;
#endif
}

PyObject *imp_pool_enter(void)
{
    if (!pool_capsule) {
        size_malloc_for(0);
        if (PyArray_API == NULL && _import_array() < 0) return NULL;
        pool_capsule = PyCapsule_New(&pool_handler, "mem_handler", NULL);
        if (!pool_capsule) return NULL;
    }
    return PyDataMem_SetHandler(pool_capsule);
}

int imp_pool_leave(PyObject *previous)
{
    PyObject *pool = PyDataMem_SetHandler(previous);
    if (!pool) return -1;
    Py_DECREF(pool);
    return 0;
}

int imp_pool_install(void)
{
    PyObject *old = imp_pool_enter();
    if (!old) return -1;
    Py_DECREF(old);
    return 0;
}

void imp_pool_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    block *freed = evict_oldest(0);
    pthread_mutex_unlock(&pool_lock);
    free_list(freed);
}

void imp_pool_set_limit(size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    cache_limit = bytes;
    block *freed = evict_oldest(bytes);
    pthread_mutex_unlock(&pool_lock);
    free_list(freed);
}

void imp_pool_set_reserve(size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    reserve_limit = bytes;
    in_use_highest = in_use;
    block *freed = evict_oldest(cache_room());
    pthread_mutex_unlock(&pool_lock);
    free_list(freed);
    size_malloc_for(bytes);
}

void imp_pool_stats(size_t *cached, size_t *limit, size_t *handed_out, size_t *reserve,
                    unsigned long long *hit, unsigned long long *miss)
{
    pthread_mutex_lock(&pool_lock);
    *cached = cached_bytes;
    *limit = cache_limit;
    *handed_out = in_use;
    *reserve = reserve_limit;
    *hit = hits;
    *miss = misses;
    pthread_mutex_unlock(&pool_lock);
}
