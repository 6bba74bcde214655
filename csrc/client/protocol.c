/* protocol.c: the client's protocols, one record each (nhb__protocol in
 * client.h), indexed by nhb_protocol_t (the names come from NHB_PROTOCOL_MAP
 * in nhb.h).
 *
 * client.c calls a protocol's run hooks as a run is created and destroyed;
 * pool.c picks a connection's session and transport from the record when it
 * builds a worker's pool, counts a new connection with its counter, and calls
 * its worker and connection hooks. Each hook is the protocol's own: it never
 * runs for another protocol's run. An entry left out here has no session, and
 * check_config (client.c) refuses that protocol by its number.
 */
#include "client/client.h"

const nhb__protocol nhb__protocols[NHB_PROTO_COUNT] = {
    [NHB_PROTO_HTTP1] =
        {
            .name = "HTTP/1.1",
            .session = &nhb__session_h1,
            .reuse_lru = 1,
            .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP1_TOTAL,
            .conn_free = nhb__h1_conn_free,
        },
    /* gRPC too: the HTTP/2 session with config.grpc (session_grpc.c). */
    [NHB_PROTO_HTTP2] =
        {
            .name = "HTTP/2",
            .session = &nhb__session_h2,
            .multiplexes = 1,
            .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP2_TOTAL,
            .refused = "REFUSED_STREAM",
            .run_init = nhb__h2_run_init,
            .run_free = nhb__h2_run_free,
            .worker_init = nhb__h2_worker_init,
            .worker_close = nhb__h2_worker_close,
            .worker_free = nhb__h2_worker_free,
            .conn_free = nhb__h2_conn_free,
        },
    [NHB_PROTO_HTTP3] =
        {
            .name = "HTTP/3",
            .session = &nhb__session_h3,
            .transport = &nhb__transport_quic,
            .multiplexes = 1,
            .reuse_lru = 1,
            .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP3_TOTAL,
            .refused = "H3_REQUEST_REJECTED",
            .run_init = nhb__h3_run_init,
            .run_free = nhb__h3_run_free,
            .worker_close = nhb__h3_worker_close,
            .conn_free = nhb__h3_conn_free,
        },
    /* The echo protocols speak no HTTP: upstream_cx_total only. */
    [NHB_PROTO_TCP] =
        {
            .name = "tcp:// echo",
            .session = &nhb__session_tcp_echo,
            .transport = &nhb__transport_tcp,
            .reuse_lru = 1,
            .cx_counter = -1,
            .run_init = nhb__echo_run_init,
            .run_free = nhb__echo_run_free,
            .conn_free = nhb__echo_conn_free,
        },
    [NHB_PROTO_UDP] =
        {
            .name = "udp:// echo",
            .session = &nhb__session_udp_echo,
            .transport = &nhb__transport_udp,
            .reuse_lru = 1,
            .cx_counter = -1,
            .run_init = nhb__echo_run_init,
            .run_free = nhb__echo_run_free,
            .conn_free = nhb__echo_conn_free,
        },
};
