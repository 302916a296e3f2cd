/* The peer of bench/http_engine.cpp: libevent's evhttp (Debian's libevent 2.1, the HTTP server
 * TF Serving's REST API is built on) answering every request with a fixed JSON body on one
 * event loop, as bench_http_engine's bare handler of our engine (core/http_server.h) does: the
 * ceiling of each library, measured in the same run under the same wrk.
 *
 * usage: bench_peer_evhttp_fixed PORT    (listens on 127.0.0.1:PORT; SIGTERM or SIGINT stops it)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/* half_plus_two's answer to {"instances": [1.0, 2.0, 5.0]}, as tensorhub-serve-lite sends it. */
static const char kBody[] = "{\"predictions\":[2.5,3.0,4.5]}";

static void answer(struct evhttp_request *request, void *unused) {
  (void)unused;
  struct evbuffer *out = evhttp_request_get_output_buffer(request);
  evbuffer_add_reference(out, kBody, sizeof kBody - 1, NULL, NULL);
  evhttp_add_header(evhttp_request_get_output_headers(request), "Content-Type", "application/json");
  evhttp_send_reply(request, 200, "OK", NULL);
}

static void on_signal(evutil_socket_t sig, short events, void *base) {
  (void)sig;
  (void)events;
  event_base_loopexit((struct event_base *)base, NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  const int port = atoi(argv[1]);
  struct event_base *base = event_base_new();
  struct evhttp *http = evhttp_new(base);
  if (!base || !http) {
    fprintf(stderr, "bench_peer_evhttp_fixed: cannot create the event loop\n");
    return 1;
  }
  evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
  evhttp_set_gencb(http, answer, NULL);
  if (!evhttp_bind_socket_with_handle(http, "127.0.0.1", (ev_uint16_t)port)) {
    fprintf(stderr, "bench_peer_evhttp_fixed: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  struct event *term = evsignal_new(base, SIGTERM, on_signal, base);
  struct event *interrupt = evsignal_new(base, SIGINT, on_signal, base);
  event_add(term, NULL);
  event_add(interrupt, NULL);
  printf("listening on 127.0.0.1:%d\n", port);
  fflush(stdout);
  event_base_dispatch(base);
  event_free(term);
  event_free(interrupt);
  evhttp_free(http);
  event_base_free(base);
  return 0;
}
