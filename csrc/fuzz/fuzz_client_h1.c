/* fuzz_client_h1.c: the client's HTTP/1.1 response path (session_h1.c and
 * llhttp, through pool.c): bytes from a server, fed to real connections
 * through a memory transport. Status counting, Content-Length, chunked and
 * close-delimited ends, interim responses, HEAD, keep-alive and close,
 * responses nobody asked for. See fuzz_client.h for the input format and the
 * invariants checked. */
#define FUZZ_HTTP2 0
#include "fuzz_client.h"
