/* The worker thread's block pool for numpy array data (see _pool.c). */
#ifndef IMPERATIVE_POOL_H
#define IMPERATIVE_POOL_H
#include <stddef.h>
#include <Python.h>

/* Make the pool numpy's allocator in the calling thread's context; -1 with a Python error. */
int imp_pool_install(void);
/* The same for a while: returns the allocator it replaced (a new reference; NULL with a
 * Python error), which imp_pool_leave puts back (-1 with a Python error). */
PyObject *imp_pool_enter(void);
int imp_pool_leave(PyObject *previous);
/* Hand back the pages of every free block, and the segments that are wholly free. */
void imp_pool_trim(void);
/* Keep `bytes` of free memory mapped, or what the most handed out at once needs where that
 * is more (a budget may allow less); the rest is handed back now. */
void imp_pool_set_limit(size_t bytes);
/* Under a memory budget of `bytes` (0: none), keep the large blocks handed out plus the
 * free memory kept mapped within the budget, or within the most handed out at once where
 * that is more, with room for fragmentation (see _pool.c: FRAGMENTATION). */
void imp_pool_set_reserve(size_t bytes);
void imp_pool_stats(size_t *cached, size_t *limit, size_t *handed_out, size_t *reserve,
                    size_t *room, unsigned long long *hits, unsigned long long *misses,
                    size_t *highest, size_t *largest, size_t *scattered);

#endif
