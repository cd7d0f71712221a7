// Claims the library's operator namespace. Each operator defines its own
// schemas next to its kernels (custom_op/ops/<name>/<name>_schema.cpp).
#include "common/library.h"

CUSTOM_OP_LIBRARY(m) {
  (void)m;  // no schema here
}
