/* protocol.c: the client's protocols, indexed by nhb_protocol_t. Each record
 * (nhb__protocol in client.h) lives in its session file with the hooks it
 * names; this table is built from NHB_PROTOCOL_MAP in nhb.h, so a new
 * protocol adds its line there and its record in its own file, nothing here.
 *
 * client.c calls a protocol's run hooks as a run is created and destroyed;
 * pool.c picks a connection's session and transport from the record when it
 * builds a worker's pool, counts a new connection with its counter, and calls
 * its worker and connection hooks. Each hook is the protocol's own: it never
 * runs for another protocol's run.
 */
#include "client/client.h"

const nhb__protocol* const nhb__protocols[NHB_PROTO_COUNT] = {
#define NHB__PROTO_ENTRY(id, name, record) [NHB_PROTO_##id] = &nhb__protocol_##record,
    NHB_PROTOCOL_MAP(NHB__PROTO_ENTRY)
#undef NHB__PROTO_ENTRY
};
