/* version.c: what this build is. The definitions come from CMakeLists.txt on this
 * file alone, so that a new version or commit recompiles one file. */
#include "nhb.h"

#ifndef NHB_VERSION
#define NHB_VERSION "0+unknown"
#endif
#ifndef NHB_COMMIT
#define NHB_COMMIT ""
#endif
#ifndef NHB_BUILD_SANITIZE
#define NHB_BUILD_SANITIZE 0
#endif
#ifndef NHB_BUILD_WERROR
#define NHB_BUILD_WERROR 0
#endif

const char* nhb_version(void) { return NHB_VERSION; }

const char* nhb_build_commit(void) { return NHB_COMMIT; }

int nhb_build_sanitized(void) { return NHB_BUILD_SANITIZE; }

int nhb_build_werror(void) { return NHB_BUILD_WERROR; }
