/* error.c: names and messages for the core's error codes. */
#include <string.h>
#include <uv.h>

#include "nhb.h"

const char* nhb_err_name(int err) {
  switch (err) {
#define NHB__ERR_NAME(name, code, msg) \
  case code:                           \
    return #name;
    NHB_ERRNO_MAP(NHB__ERR_NAME)
#undef NHB__ERR_NAME
    default:
      /* Anything else is a negated errno that came from libuv. */
      return err < 0 ? uv_err_name(err) : "OK";
  }
}

const char* nhb_strerror(int err) {
  switch (err) {
#define NHB__ERR_MSG(name, code, msg) \
  case code:                          \
    return msg;
    NHB_ERRNO_MAP(NHB__ERR_MSG)
#undef NHB__ERR_MSG
    default:
      return err < 0 ? uv_strerror(err) : "success";
  }
}
