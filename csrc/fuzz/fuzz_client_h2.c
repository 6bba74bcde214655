/* fuzz_client_h2.c: the client's HTTP/2 response path (session_h2.c and its
 * nghttp2 callbacks, through pool.c): frames from a server, fed to real
 * connections through a memory transport. SETTINGS, HEADERS and DATA, interim
 * responses, RST_STREAM and REFUSED_STREAM, GOAWAY, stream limits. See
 * fuzz_client.h for the input format and the invariants checked. */
#define FUZZ_HTTP2 1
#include "fuzz_client.h"
