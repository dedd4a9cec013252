/* A caching allocator for the data of numpy arrays made on the interpreter's worker thread.
 *
 * Why: the worker thread allocated from its own glibc arena, whose top is trimmed (pages
 * handed back with MADV_DONTNEED) whenever enough of it is free. A training step frees and
 * reallocates the same large buffers every step, so each step paid to fault ~10 MB of pages
 * back in (2,500 faults, 6-13 ms of system time in a 100 ms MLP step). Blocks of
 * POOL_MIN_BLOCK bytes or more come from the pool's own segments instead (address space
 * mapped here, SEGMENT_BYTES at a time), carved best-fit from free chunks that split and
 * coalesce with their neighbours; smaller ones go to malloc.
 *
 * Why segments of its own, not an exact-size cache in front of malloc (the earlier design):
 * under a DTR budget the sizes a step asks for change with what is evicted, so the cache
 * held blocks of sizes nobody asked for again while glibc's arena, its free chunks pinned
 * between the small objects the worker also allocates, grew beside it: a MobileNet at
 * 0.5 P kept 51 MiB free inside malloc and 28 MiB in the cache, and its process reached
 * the RSS of the unconstrained run (136 MiB against 137), faulting pages in for five steps
 * on the way. Here freed memory coalesces, so a step's buffers of any size fit the memory
 * the last step used.
 *
 * Freed memory stays mapped for the next allocation (each segment keeps a bit a page:
 * touched or not), as much as the most handed out at once recently (WINDOW) needs, with
 * room for fragmentation (FRAGMENTATION; at least cache_limit); under a memory budget,
 * the blocks handed out plus the free memory kept mapped stay within the budget, or
 * within the most handed out at once where that is more, with that room (cache_room).
 * Past that, the free chunks with the most touched pages hand them back
 * (MADV_DONTNEED), the first page, which holds the chunk's header, kept. A block is
 * carved from the free chunk whose pages it would take are touched the most, the
 * smallest of those: no page faulted in where it can be helped.
 *
 * It is installed with numpy's NEP 49 handler API in the worker thread's context only, so
 * the user's own arrays are untouched. A block may be freed on any thread: a mutex guards
 * the pool. Each block carries a 64-byte header, which keeps the data 64-byte aligned
 * (numpy's realloc does not pass the old size).
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
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "_pool.h"

#define HEADER 64                          /* a chunk's header; a block's tag */
#define PAGE ((size_t)4096)
#define POOL_MIN_BLOCK (256 << 10)
#define SEGMENT_BYTES ((size_t)64 << 20)  /* address space mapped at a time (touched: RSS) */
#define MIN_SPLIT ((size_t)64 << 10)      /* a smaller remainder stays with the block */
#define BINS 64                            /* free chunks by floor(log2(bytes)) */
/* The memory kept mapped may pass the most handed out at once (or the budget) by
 * 1/FRAGMENTATION of it, the largest block and what was faulted in for want of a free
 * piece large enough (`scattered`): the free chunks a step's sizes leave between its
 * blocks. With no such room, a MobileNet at 0.5 P handed 13 MiB of pages back and faulted
 * them in again every step (3,300 faults, 10% slower steps); with a quarter, none after
 * its fourth step, but long attention (4 MiB attention maps, its budget under its floor)
 * still faulted a map in every step, which the largest block's room ended, and a DenseNet
 * (its concatenations a new size each layer) 7,500 pages a step at 0.3 P (12% slower),
 * which `scattered` ended. */
#define FRAGMENTATION 4
/* A chunk's data starts one of COLORS cache lines into its first page, in turn: at the same
 * offset in every page, an op's operands were a multiple of 4 KiB apart, and a load from
 * one waited for a store to another (the CPU matches addresses by their low 12 bits
 * first): an LSTM's unconstrained step 5% slower, a dropout MLP's 9%. */
#define COLORS 48

/* A mapping the pool carves chunks from, with a bit for each page: set once the page was
 * handed out (written: it counts in the process's memory) and cleared when handed back. */
typedef struct segment {
    char *base;
    size_t pages;
    uint64_t *touched;
} segment;

/* The header at the start of a chunk of a segment. */
typedef struct chunk {
    size_t size;                 /* its bytes, header included (a multiple of PAGE) */
    size_t asked;                /* what the caller asked for; 0 while free */
    struct chunk *left, *right;  /* its neighbours in its segment (NULL at its ends) */
    struct chunk *prev, *next;   /* while free: in its bin */
    segment *seg;
} chunk;

/* The HEADER bytes before a block's data: a chunk's, or a small block's from malloc. */
typedef struct tag {
    chunk *owner;                /* the chunk, or NULL for a small block */
    void *raw;                   /* a small block: what malloc returned */
    size_t size;                 /* a small block: what the caller asked for */
} tag;

static tag *tag_of(void *ptr) { return (tag *)((char *)ptr - HEADER); }

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk *bins[BINS];
static unsigned color;          /* the next block's data offset, in cache lines */
static size_t touched_pages;    /* pages of all segments marked touched */
static size_t cache_limit = 64 << 20;
static unsigned long long hits, misses;
static size_t in_use;           /* bytes of chunks handed out and not yet freed */
/* The most handed out at once and the largest chunk, over a window of allocations (the
 * last two windows count: recent_highest), since the reserve was set. */
static size_t in_use_highest, highest_before;
static size_t largest, largest_before;
static size_t served;           /* blocks handed out in this window */
static size_t scattered;        /* bytes faulted in since then although as much free memory
                                 * was mapped, in pieces too small for the block */
static size_t reserve_limit;    /* 0, or the memory budget (see cache_room) */

/* A window ends once it has handed out WINDOW blocks: a training step hands out tens to a
 * few thousand, so a window holds whole steps and their peak, and a passing peak (one
 * large batch, an evaluation) stops holding memory two windows after it. */
#define WINDOW 16384

static size_t larger(size_t a, size_t b) { return a > b ? a : b; }

/* The most handed out at once recently (this window and the one before). */
static size_t recent_highest(void) { return larger(in_use_highest, highest_before); }

/* Count a chunk handed out; past the window, the window before is forgotten. */
static void count_handed_out(size_t size)
{
    in_use += size;
    in_use_highest = larger(in_use_highest, in_use);
    largest = larger(largest, size);
    if (++served > WINDOW) {
        highest_before = in_use_highest;
        largest_before = largest;
        in_use_highest = in_use;
        largest = served = 0;
    }
}

/* What of `bytes` lies beyond the bytes handed out now. */
static size_t beyond_in_use(size_t bytes) { return bytes > in_use ? bytes - in_use : 0; }

/* Free memory kept mapped: touched pages not handed out (chunks handed out are touched). */
static size_t cached_free(void) { return beyond_in_use(touched_pages * PAGE); }

/* `bytes` and room for fragmentation: a quarter more, the largest block recently, and what
 * was faulted in for want of a free piece large enough (see FRAGMENTATION). */
static size_t with_fragmentation(size_t bytes)
{
    return bytes + bytes / FRAGMENTATION + larger(largest, largest_before) + scattered;
}

/* What a memory budget lets the pool hold: the budget, or the most handed out at once
 * recently where that is more (a budget under the floor). */
static size_t budget_bound(void) { return larger(reserve_limit, recent_highest()); }

/* How much free memory may stay mapped now (the lock is held): what the most handed out
 * at once needs (a step's buffers, freed at its end, are asked for again by the next) and
 * room for fragmentation, or cache_limit where that is more. Under a memory budget no
 * more than what keeps the chunks handed out plus the free memory within budget_bound,
 * with room for fragmentation: the process's memory then follows the budget, and freed
 * memory stays mapped whenever it would be taken again anyway. */
static size_t cache_room(void)
{
    size_t room = larger(beyond_in_use(with_fragmentation(recent_highest())), cache_limit);
    if (reserve_limit) {
        size_t left = beyond_in_use(with_fragmentation(budget_bound()));
        if (room > left) room = left;
    }
    return room;
}

enum { COUNT, SET, CLEAR };

/* Count the touched pages among `n` pages of `s` from page `first`, or mark them touched
 * or not; how many were touched (COUNT, CLEAR) or became so (SET). */
static size_t pages(segment *s, size_t first, size_t n, int op)
{
    size_t changed = 0, i = first, end = first + n;
    while (i < end) {
        size_t word = i >> 6, lo = i & 63, start = i - lo;
        size_t hi = end - start < 64 ? end - start : 64;        /* bits [lo, hi) */
        uint64_t mask = (hi == 64 ? ~(uint64_t)0 : (((uint64_t)1 << hi) - 1))
                        & ~(((uint64_t)1 << lo) - 1);
        uint64_t bits = s->touched[word] & mask;
        if (op == SET) {
            changed += __builtin_popcountll(mask & ~bits);
            s->touched[word] |= mask;
        } else {
            changed += __builtin_popcountll(bits);
            if (op == CLEAR) s->touched[word] &= ~mask;
        }
        i = start + hi;
    }
    return changed;
}

static size_t page_of(chunk *c) { return (size_t)((char *)c - c->seg->base) / PAGE; }

/* Mark `n` pages of chunk `c`, from its page `from`, touched or handed back. */
static void touch(chunk *c, size_t from, size_t n)
{
    touched_pages += pages(c->seg, page_of(c) + from, n, SET);
}

static int bin_of(size_t size) { return 63 - __builtin_clzll(size); }

static void bin_insert(chunk *c)
{
    int i = bin_of(c->size);
    c->prev = NULL;
    c->next = bins[i];
    if (c->next) c->next->prev = c;
    bins[i] = c;
}

static void bin_remove(chunk *c)
{
    if (c->prev) c->prev->next = c->next; else bins[bin_of(c->size)] = c->next;
    if (c->next) c->next->prev = c->prev;
}

/* The free chunk of `total` bytes or more whose first `total` bytes (what a block takes)
 * have the most pages touched already (none to fault in, and the process's memory stays
 * where it was), the smallest of those; NULL when none is large enough. */
static chunk *best_fit(size_t total)
{
    chunk *best = NULL;
    size_t best_cover = 0;
    for (int i = bin_of(total); i < BINS; i++) {
        for (chunk *c = bins[i]; c; c = c->next) {
            if (c->size < total) continue;
            size_t cover = pages(c->seg, page_of(c), total / PAGE, COUNT);
            if (!best || cover > best_cover || (cover == best_cover && c->size < best->size)) {
                best = c;
                best_cover = cover;
            }
        }
        if (best && best_cover == total / PAGE) break;   /* higher bins: only larger */
    }
    return best;
}

/* A new segment of at least `total` bytes as one free chunk, only its header's page
 * touched. */
static chunk *new_segment(size_t total)
{
    size_t len = total > SEGMENT_BYTES ? (total + SEGMENT_BYTES - 1) / SEGMENT_BYTES
                                         * SEGMENT_BYTES : SEGMENT_BYTES;
    segment *s = malloc(sizeof(segment));
    if (!s) return NULL;
    s->pages = len / PAGE;
    s->touched = calloc((s->pages + 63) / 64, sizeof(uint64_t));
    void *p = s->touched ? mmap(NULL, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(s->touched);
        free(s);
        return NULL;
    }
    s->base = p;
    chunk *c = (chunk *)p;
    c->size = len;
    c->asked = 0;
    c->left = c->right = NULL;
    c->seg = s;
    touch(c, 0, 1);
    bin_insert(c);
    return c;
}

/* Hand out `total` bytes of the free chunk `c`, splitting off the rest as a free chunk
 * when it is large enough. The block's pages count as touched from now on (the caller
 * writes them); how many were not. */
static size_t take(chunk *c, size_t total, size_t asked)
{
    bin_remove(c);
    if (c->size - total >= MIN_SPLIT) {
        chunk *rest = (chunk *)((char *)c + total);
        rest->size = c->size - total;
        rest->asked = 0;
        rest->left = c;
        rest->right = c->right;
        rest->seg = c->seg;
        if (rest->right) rest->right->left = rest;
        c->right = rest;
        c->size = total;
        touch(rest, 0, 1);
        bin_insert(rest);
    }
    size_t before = touched_pages;
    touch(c, 0, c->size / PAGE);
    c->asked = asked;
    count_handed_out(c->size);
    return touched_pages - before;
}

/* A block faulted `faulted` pages in although `mapped_free` bytes of free memory were
 * mapped: where that was enough for it, they lay in pieces too small, and the memory kept
 * mapped makes room for as much more (at most the bound again: a DenseNet at 0.3 P
 * needed half of it; with a quarter it faulted 640 pages in a step), so that the next
 * step's blocks find it instead of faulting it in again. */
static void count_scattered(size_t faulted, size_t mapped_free, size_t total)
{
    if (!faulted || mapped_free < total) return;
    scattered += faulted * PAGE;
    if (scattered > budget_bound()) scattered = budget_bound();
}

/* Hand back the last touched pages of a free chunk, up to `want` of them, its first page
 * (the header) kept; how many it handed back. The end goes first: a block is carved from
 * a chunk's start, so what stays touched there is what the next block takes. */
static size_t release(chunk *c, size_t want)
{
    size_t first = page_of(c), n = c->size / PAGE, from = n, found = 0;
    uint64_t *touched = c->seg->touched;
    while (from > 1 && found < want) {
        size_t at = first + from;              /* (whole words of untouched pages at once) */
        if (!(at & 63) && from > 64 && !touched[(at >> 6) - 1]) {
            from -= 64;
            continue;
        }
        from--;
        found += pages(c->seg, first + from, 1, COUNT);
    }
    if (!found) return 0;
    madvise((char *)c + from * PAGE, (n - from) * PAGE, MADV_DONTNEED);
    touched_pages -= pages(c->seg, first + from, n - from, CLEAR);
    return found;
}

/* Hand back the touched pages of free chunks, the most touched chunk first, until at most
 * `keep` bytes of free memory stay mapped (the lock is held): no more than that, since
 * what goes now is faulted in again when a step needs it. */
static void trim_to(size_t keep)
{
    while (cached_free() > keep) {
        chunk *most = NULL;
        size_t most_pages = 0;
        for (int i = 0; i < BINS; i++)
            for (chunk *c = bins[i]; c; c = c->next) {
                size_t n = pages(c->seg, page_of(c) + 1, c->size / PAGE - 1, COUNT);
                if (n > most_pages) {
                    most = c;
                    most_pages = n;
                }
            }
        if (!most) break;
        release(most, (cached_free() - keep + PAGE - 1) / PAGE);
    }
}

/* Two free chunks side by side, `c` and the one after it, become one (the lock is held). */
static void join(chunk *c)
{
    chunk *r = c->right;
    bin_remove(c);
    bin_remove(r);
    c->size += r->size;
    c->right = r->right;
    if (c->right) c->right->left = c;
    bin_insert(c);
}

/* A freed chunk rejoins its free neighbours (the lock is held). */
static void give_back(chunk *c)
{
    in_use -= c->size;
    c->asked = 0;
    bin_insert(c);
    if (c->right && !c->right->asked) join(c);
    if (c->left && !c->left->asked) join(c->left);
}

static void *pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= POOL_MIN_BLOCK) {
        size_t total = (size + 2 * HEADER + COLORS * 64 + PAGE - 1) / PAGE * PAGE;
        char *data = NULL;
        pthread_mutex_lock(&pool_lock);
        chunk *c = best_fit(total);
        if (c) {
            hits++;
        } else {
            misses++;
            c = new_segment(total);
        }
        if (c) {
            size_t mapped_free = cached_free();
            count_scattered(take(c, total, size), mapped_free, total);
            trim_to(cache_room());
            data = (char *)c + 2 * HEADER + 64 * (color++ % COLORS);
            tag_of(data)->owner = c;
        }
        pthread_mutex_unlock(&pool_lock);
        return data;
    }
    void *raw = malloc(size + HEADER + 64);   /* aligned by hand, as a chunk's data is */
    if (!raw) return NULL;
    char *data = (char *)(((uintptr_t)raw + HEADER + 63) & ~(uintptr_t)63);
    tag_of(data)->owner = NULL;
    tag_of(data)->raw = raw;
    tag_of(data)->size = size;
    return data;
}

static void pool_free(void *ctx, void *ptr, size_t size_hint)
{
    (void)ctx;
    (void)size_hint;
    if (!ptr) return;
    chunk *c = tag_of(ptr)->owner;
    if (!c) {
        free(tag_of(ptr)->raw);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    give_back(c);
    trim_to(cache_room());
    pthread_mutex_unlock(&pool_lock);
}

/* The bytes the caller asked for at `ptr`. */
static size_t asked_of(void *ptr)
{
    tag *t = tag_of(ptr);
    return t->owner ? t->owner->asked : t->size;
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
    size_t old = asked_of(ptr);
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
 * 2,100-3,100, a U-Net up to 3,000. (That was before the pool's own segments: blocks of
 * POOL_MIN_BLOCK bytes or more no longer come from malloc; these settings now serve the
 * smaller ones and the rest of the process.) */
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

/* Hand every free chunk's pages back, and the segments that are wholly free. */
void imp_pool_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    trim_to(0);
    for (int i = 0; i < BINS; i++) {
        chunk *c = bins[i];
        while (c) {
            chunk *next = c->next;
            if (!c->left && !c->right) {
                segment *s = c->seg;
                bin_remove(c);
                touched_pages -= pages(s, 0, s->pages, COUNT);
                munmap(s->base, s->pages * PAGE);
                free(s->touched);
                free(s);
            }
            c = next;
        }
    }
    pthread_mutex_unlock(&pool_lock);
}

void imp_pool_set_limit(size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    cache_limit = bytes;
    trim_to(cache_room());
    pthread_mutex_unlock(&pool_lock);
}

void imp_pool_set_reserve(size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    reserve_limit = bytes;
    in_use_highest = in_use;
    highest_before = largest = largest_before = served = scattered = 0;
    trim_to(cache_room());
    pthread_mutex_unlock(&pool_lock);
    size_malloc_for(bytes);
}

void imp_pool_stats(size_t *cached, size_t *limit, size_t *handed_out, size_t *reserve,
                    size_t *room, unsigned long long *hit, unsigned long long *miss,
                    size_t *highest, size_t *largest_recent, size_t *scattered_bytes)
{
    pthread_mutex_lock(&pool_lock);
    *highest = recent_highest();
    *largest_recent = larger(largest, largest_before);
    *scattered_bytes = scattered;
    *cached = cached_free();
    *room = cache_room();
    *limit = cache_limit;
    *handed_out = in_use;
    *reserve = reserve_limit;
    *hit = hits;
    *miss = misses;
    pthread_mutex_unlock(&pool_lock);
}
