vcl 4.1;

# ChangeServer behind Varnish: a shared cache in front of the change feed (README, "The feed through HTTP
# caches"). Replace __HOST__ and __PORT__ with the server's address (scripts/varnish-front.sh does, and runs it).
#
# Identical concurrent polls wait on Varnish's waiting list for the one request that goes to the server, and are
# all woken when its answer lands (nginx's cache lock instead re-checks every 500 ms). Answers are kept as the
# server marks them (Cache-Control: public, max-age=60 for changes, 2 s for empty answers, resets, 404s and 410s;
# no-store for a 410 to a version ahead of the current one, which is not even a hit-for-miss object);
# nothing is ever served stale, since a stale empty answer would make a client poll again at once. Requests with
# Authorization (--read-token: answers are private, no-store) and streams (Accept: text/event-stream) bypass the
# cache; everything else is passed through. Run varnishd with the parameters that scripts/varnish-front.sh passes
# (thread pool and queue, linger, workspace), each with the reason a 10,000-poll fan-out needs it.

backend changeserver {
    .host = "__HOST__";
    .port = "__PORT__";
    .connect_timeout = 5s;
    # A held poll lasts up to 300 s (plus up to 1 s of jitter).
    .first_byte_timeout = 330s;
    # Streams send a heartbeat every 15 s.
    .between_bytes_timeout = 60s;
}

sub vcl_recv {
    if (req.url ~ "^/v1/(collections|views)/[^/]+/changes(\?|$)" && (req.method == "GET" || req.method == "HEAD")) {
        if (req.http.Accept ~ "(?i)text/event-stream") {
            return (pipe);
        }
        if (req.http.Authorization) {
            return (pass);
        }
        # Every poll that reaches the cache is answered JSON (streams were piped above), whatever its Accept says;
        # the server's Vary: Accept (for streams) would otherwise keep one answer per Accept value: polls that
        # differed in it alone were not collapsed, and one whose Accept differed from the first one's waited
        # twice its hold.
        set req.http.Accept = "application/json";
        return (hash);
    }
    return (pass);
}

sub vcl_pipe {
    # One stream per backend connection, closed with it.
    set bereq.http.Connection = "close";
}

sub vcl_backend_response {
    if (bereq.url ~ "^/v1/(collections|views)/[^/]+/changes(\?|$)") {
        set beresp.grace = 0s;
        set beresp.keep = 0s;
        # A 410 for a version ahead of the current one (no-store): anyone may ask for it, at the URL every client
        # polls once the collection gets there. As the hit-for-miss object below, it made those polls skip the
        # waiting list for 1 s, each reaching the server; with no object at all they wait for one another.
        if (beresp.status == 410 && beresp.http.Cache-Control ~ "(?i)no-store") {
            set beresp.ttl = 0s;
            set beresp.uncacheable = true;
            return (deliver);
        }
        # An answer not to be stored (no-store: a 429, a 503 at shutdown, every answer with --read-token) would
        # become, by Varnish's built-in rules, a hit-for-miss object for 120 s, during which identical polls of that
        # URL no longer wait for one another: each would go to the server. Kept 1 s instead: long enough that
        # requests for a URL that keeps answering so are not fed one fetch at a time from the waiting list, short
        # enough that the polls of a restarted server's clients collapse again. (A 404 of a missing collection is
        # stored 2 s, as a 410 of an old version is.)
        if (beresp.ttl <= 0s || beresp.http.Cache-Control ~ "(?i)(no-cache|no-store|private)") {
            set beresp.ttl = 1s;
            set beresp.uncacheable = true;
            return (deliver);
        }
    }
}

# Varnish's own error (no server reached, or none answered in time) in the API's error form, not its HTML page.
sub vcl_backend_error {
    # With requests waiting, Varnish keeps this object 1 s for them (none without), and 5 s of grace more: a feed
    # URL went on answering this 502 for 5 s after its server was back. No grace, nor keep.
    set beresp.grace = 0s;
    set beresp.keep = 0s;
    set beresp.status = 502;
    set beresp.http.Content-Type = "application/json";
    set beresp.http.Cache-Control = "no-store";
    # (A quote and a closing brace together would end the long string: hence the spaces.) A read may simply be sent
    # again; a write may have been applied before the answer was lost, and is not to be sent again before it is read.
    if (bereq.method == "GET" || bereq.method == "HEAD") {
        set beresp.http.Retry-After = "1";
        synthetic({"{"error": {"code": "bad_gateway", "message": "The front reached no server for this request, or none answered in time. Retry shortly." } }"});
    } else {
        synthetic({"{"error": {"code": "bad_gateway", "message": "The front reached no server for this request, or none answered in time. A write's outcome is unknown: read before writing again." } }"});
    }
    return (deliver);
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
