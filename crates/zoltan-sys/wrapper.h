/* The Zoltan C API (zoltan.h includes mpi.h and zoltan_types.h). */
#include <zoltan.h>
