#ifndef SALVO_CJEMALLOC_SHIM_H
#define SALVO_CJEMALLOC_SHIM_H
// Debian's libjemalloc-dev builds without a symbol prefix: linking it replaces malloc
// for the whole process. `mallctl` is referenced so the linker keeps the library.
#include <jemalloc/jemalloc.h>
#endif
