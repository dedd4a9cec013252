/* A caching allocator for the data of numpy arrays made on the interpreter's worker thread.
 *
 * Why: the worker thread allocates from its own glibc arena, whose top is trimmed (pages
 * handed back with MADV_DONTNEED) whenever enough of it is free. A training step frees and
 * reallocates the same large buffers every step, so each step paid to fault ~10 MB of pages
 * back in (2,500 faults, 6-13 ms of system time in a 100 ms MLP step). Blocks of
 * POOL_MIN_BLOCK bytes or more are kept here instead, by exact size (a step asks for the same
 * sizes again), up to a byte limit; smaller ones go to malloc as before.
 *
 * It is installed with numpy's NEP 49 handler API in the worker thread's context only, so
 * the user's own arrays are untouched. A block may be freed on any thread: a mutex guards
 * the lists. Each block carries a 64-byte header holding its size (numpy's realloc does not
 * pass the old size), which keeps the data 64-byte aligned.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "_pool.h"

#define HEADER 64
#define POOL_MIN_BLOCK (256 << 10)
#define BUCKETS 64

typedef struct block {
    size_t size;        /* bytes the caller asked for */
    struct block *next; /* while cached */
} block;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static block *buckets[BUCKETS];
static size_t cached_bytes, cache_limit = 64 << 20;
static unsigned long long hits, misses;

static size_t bucket_of(size_t size) { return (size >> 12) % BUCKETS; }

static void *pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= POOL_MIN_BLOCK) {
        pthread_mutex_lock(&pool_lock);
        for (block **link = &buckets[bucket_of(size)]; *link; link = &(*link)->next)
            if ((*link)->size == size) {
                block *b = *link;
                *link = b->next;
                cached_bytes -= size;
                hits++;
                pthread_mutex_unlock(&pool_lock);
                return (char *)b + HEADER;
            }
        misses++;
        pthread_mutex_unlock(&pool_lock);
    }
    size_t total = (size + HEADER + 63) / 64 * 64;
    block *b = aligned_alloc(64, total);
    if (!b) return NULL;
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
        if (cached_bytes + b->size <= cache_limit) {
            size_t i = bucket_of(b->size);
            b->next = buckets[i];
            buckets[i] = b;
            cached_bytes += b->size;
            pthread_mutex_unlock(&pool_lock);
            return;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    free(b);
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

int imp_pool_install(void)
{
    if (!pool_capsule) {
        if (PyArray_API == NULL && _import_array() < 0) return -1;
        pool_capsule = PyCapsule_New(&pool_handler, "mem_handler", NULL);
        if (!pool_capsule) return -1;
    }
    PyObject *old = PyDataMem_SetHandler(pool_capsule);
    if (!old) return -1;
    Py_DECREF(old);
    return 0;
}

void imp_pool_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < BUCKETS; i++)
        while (buckets[i]) {
            block *b = buckets[i];
            buckets[i] = b->next;
            free(b);
        }
    cached_bytes = 0;
    pthread_mutex_unlock(&pool_lock);
}

void imp_pool_set_limit(size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    cache_limit = bytes;
    int over = cached_bytes > bytes;
    pthread_mutex_unlock(&pool_lock);
    if (over) imp_pool_trim();
}

void imp_pool_stats(size_t *cached, size_t *limit, unsigned long long *hit, unsigned long long *miss)
{
    pthread_mutex_lock(&pool_lock);
    *cached = cached_bytes;
    *limit = cache_limit;
    *hit = hits;
    *miss = misses;
    pthread_mutex_unlock(&pool_lock);
}
