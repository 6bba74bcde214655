/* transport_udp.c: a connected UDP socket (udp:// echo, HTTP/3).
 *
 * The pool initializes the UDP handle (c->udp) and calls `start`, which
 * connects it to the target, so that the kernel filters datagrams from
 * anyone else and plain send() works, and starts receiving. A connected UDP
 * socket has no handshake: the pool reports it up at once (on_connected).
 *
 * Each datagram received reaches the session as one on_data call, whole:
 * datagram boundaries are the session's framing (an echo reply, a QUIC
 * packet). Reads use the connection's read buffer (NHB__READ_BUFFER_SIZE,
 * larger than any UDP payload over IPv4 or IPv6 without jumbograms), so a
 * datagram is never truncated.
 *
 * Writes are one datagram each and never queue: uv_udp_try_send() either
 * hands the datagram to the kernel or fails with UV_EAGAIN when the socket
 * buffer is full. The session decides what that means (the echo session
 * counts a lost request; QUIC retransmits on its own).
 */
#include "client/client.h"

static void udp_on_connected(nhb__conn* c) { nhb__conn_ready(c); }

static int udp_on_read(nhb__conn* c, const char* data, size_t len) {
  return c->session->on_data(c, data, len);
}

int nhb__udp_send(nhb__conn* c, const uv_buf_t* bufs, unsigned n) {
  /* uv_udp_try_send() takes the buffers as writable; it only reads them. */
  int r = uv_udp_try_send(&c->udp, (uv_buf_t*)bufs, n, NULL);
  if (r < 0) return r;
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += (uint64_t)r;
  return 0;
}

static int udp_write(nhb__conn* c, const char* data, size_t len) {
  uv_buf_t buf = uv_buf_init((char*)data, (unsigned)len);
  return nhb__udp_send(c, &buf, 1);
}

static void udp_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__conn* c = (nhb__conn*)handle->data;
  buf->base = c->read_buffer;
  buf->len = NHB__READ_BUFFER_SIZE;
}

static void udp_on_recv(uv_udp_t* handle, ssize_t nread, const uv_buf_t* buf, const struct sockaddr* addr,
                        unsigned flags) {
  nhb__conn* c = (nhb__conn*)handle->data;
  /* nread 0 with no address: the socket had nothing more to read. */
  if (nread == 0 && addr == NULL) return;
  if (c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING) return;
  /* An empty datagram: nhb__conn_read() takes 0 bytes for nothing at all,
   * so the echo session's count of datagrams that match no request gets it
   * here. */
  if (NHB__UNLIKELY(nread == 0)) {
    if (c->session == &nhb__session_udp_echo) c->worker->stats.counters[NHB_CTR_UDP_UNEXPECTED]++;
    return;
  }
  /* A datagram larger than the buffer cannot arrive (see the top), but a
   * truncated one must never pass for a whole one. */
  if (NHB__UNLIKELY(flags & UV_UDP_PARTIAL)) {
    c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
    return;
  }
  /* An error (ECONNREFUSED: an ICMP port unreachable for an earlier
   * datagram) ends the connection like a reset stream. */
  nhb__conn_read(c, nread, buf->base);
}

static int udp_start(nhb__conn* c, const nhb_sockaddr* to) {
  /* --source-address, as for TCP (nhb__conn_source): the kernel picks the
   * port when binding, since a UDP socket has no connect-time choice; a bind
   * that fails (not this host's address) fails the connection. */
  const nhb_sockaddr* src = nhb__conn_source(c);
  int r = 0;
  if (NHB__UNLIKELY(src != NULL)) r = uv_udp_bind(&c->udp, (const struct sockaddr*)src->bytes, 0);
  if (r == 0) r = uv_udp_connect(&c->udp, (const struct sockaddr*)to->bytes);
  if (r == 0) r = uv_udp_recv_start(&c->udp, udp_alloc, udp_on_recv);
  return r;
}

const nhb__transport_vtable nhb__transport_udp = {
    "udp", udp_on_connected, udp_on_read, udp_write, NULL, NULL, udp_start,
};
