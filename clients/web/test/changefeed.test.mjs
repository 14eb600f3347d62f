// node --test clients/web/test: unit tests of changefeed.js, and property tests against a real ChangeServer
// (CF_SERVER_BINARY, or the usual build folders). CF_SEED replays a history; CF_STEPS sets its length.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import {
    ChangesetError,
    applyChangeset,
    backoffDelay,
    isQuickEmptyAnswer,
    mapIndexPath,
    pollSeconds,
    quickEmptyWait,
    WriteError,
    writer,
    retryAfterSeconds,
    sectionLabel,
    subscribe,
} from "../changefeed.js";
import { call, normalized, random, randomMutation, seed, serverBinary, startServer } from "./support.mjs";

const empty = () => ({
    sections: { deleted: [], inserted: [], moved: [], updated: [] },
    items: { deleted: [], inserted: [], moved: [], updated: [] },
});
const changeset = (patch) => {
    const result = empty();
    for (const group of ["sections", "items"]) Object.assign(result[group], patch[group] ?? {});
    return result;
};
const S = (id, ...items) => ({ id, data: null, items: items.map((item) => ({ id: item, data: null })) });
const ids = (sections) => sections.map((s) => `${s.id}:${s.items.map((i) => i.id).join(",")}`).join(" ");

/**
 * A fetch that answers each request with the next of `answers` (`[status, body]`, or a function that makes the
 * answer's promise), noting its URL in `requests`, and holds the requests after the last until they are aborted.
 */
function scriptedFetch(answers, requests = []) {
    return (url, init) => {
        requests.push(url);
        const answer = answers.shift();
        if (typeof answer === "function") return answer();
        if (answer) return Promise.resolve(new Response(JSON.stringify(answer[1]), { status: answer[0] }));
        return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
    };
}

/**
 * Makes this process look like a browser page to the client: `page` takes the window's listeners (a test dispatches
 * `pagehide` and `pageshow` on it) and `document` exists; `restore` puts the globals back.
 */
function browserPage() {
    const page = new EventTarget();
    const saved = { addEventListener: globalThis.addEventListener, removeEventListener: globalThis.removeEventListener, document: globalThis.document };
    Object.assign(globalThis, {
        addEventListener: page.addEventListener.bind(page),
        removeEventListener: page.removeEventListener.bind(page),
        document: {},
    });
    return { page, restore: () => Object.assign(globalThis, saved) };
}

/**
 * A stand-in for EventSource, a new class each call (its `instances` are that test's): the streams the client
 * opened, in order; a test makes one deliver an event with `emit`.
 */
function fakeEventSourceClass() {
    return class FakeEventSource {
        static CLOSED = 2;
        static instances = [];
        constructor(url) {
            this.url = url;
            this.readyState = 0;
            this.listeners = {};
            FakeEventSource.instances.push(this);
        }
        addEventListener(type, listener) {
            (this.listeners[type] ??= []).push(listener);
        }
        emit(type, data) {
            if (type === "open") this.readyState = 1;
            for (const listener of this.listeners[type] ?? []) listener({ data: JSON.stringify(data) });
        }
        close() {
            this.readyState = 2;
        }
    };
}

describe("applyChangeset", () => {
    test("applies a batch like docs/changesets.md#coordinates with UIKit's coordinates", () => {
        const before = [S("a", "m1", "m9"), S("b", "m2"), S("old"), S("later")];
        const result = applyChangeset(
            before,
            changeset({
                sections: {
                    deleted: [{ index: 2, id: "old" }],
                    inserted: [{ index: 0, id: "new", data: null, items: [{ id: "m7", data: {} }] }],
                    moved: [{ from: 3, to: 1, id: "later" }],
                    updated: [{ index: 1, id: "later", data: { title: "Later" } }],
                },
                items: {
                    deleted: [{ at: [0, 1], id: "m9" }],
                    inserted: [{ at: [3, 0], id: "m10", data: { text: "new" } }],
                    moved: [{ from: [1, 0], to: [2, 0], id: "m2" }],
                    updated: [{ at: [2, 0], id: "m2", data: { text: "edited" } }],
                },
            })
        );
        assert.equal(ids(result), "new:m7 later: a:m2,m1 b:m10");
        assert.deepEqual(result[1].data, { title: "Later" });
        assert.deepEqual(result[2].items[0].data, { text: "edited" });
        assert.equal(ids(before), "a:m1,m9 b:m2 old: later:", "the input is left untouched");
    });

    test("keeps unchanged sections and items by identity", () => {
        const before = [S("a", "x"), S("b", "y", "z")];
        const result = applyChangeset(before, changeset({ items: { moved: [{ from: [1, 1], to: [1, 0], id: "z" }] } }));
        assert.equal(result[0], before[0]);
        assert.equal(result[1].items[1], before[1].items[0]);
        assert.equal(ids(result), "a:x b:z,y");
    });

    test("throws on changesets that do not fit", () => {
        const before = [S("a", "x", "y")];
        const bad = [
            { items: { deleted: [{ at: [0, 0], id: "y" }] } },
            { items: { deleted: [{ at: [0, 5], id: "x" }] } },
            { items: { inserted: [{ at: [0, 4], id: "n", data: null }] } },
            { items: { inserted: [{ at: [0, 0], id: "x", data: null }] } },
            { items: { moved: [{ from: [0, 0], to: [0, 1], id: "x" }, { from: [0, 1], to: [0, 1], id: "y" }] } },
            { items: { updated: [{ at: [0, 0], id: "y", data: 1 }] } },
            { sections: { deleted: [{ index: 0, id: "a" }] }, items: { deleted: [{ at: [0, 0], id: "x" }] } },
            { sections: { inserted: [{ index: 2, id: "b", items: [] }] } },
            { sections: { moved: [{ from: 0, to: 0, id: "b" }] } },
        ];
        for (const patch of bad) assert.throws(() => applyChangeset(before, changeset(patch)), ChangesetError, JSON.stringify(patch));
        assert.throws(() => applyChangeset(before, { sections: {} }), ChangesetError);
    });
});

describe("sectionLabel", () => {
    test("a view's section shows its key, not the key's JSON text", () => {
        assert.equal(sectionLabel({ id: '"open"', data: { key: "open" } }), "open");
        assert.equal(sectionLabel({ id: "2", data: { key: 2 } }), "2");
        assert.equal(sectionLabel({ id: "null", data: { key: null } }), "null");
        assert.equal(sectionLabel({ id: "s", data: { key: "k", more: 1 } }), "s", "not a view's section data");
        assert.equal(sectionLabel({ id: "s", data: { title: "T" } }), "T");
        assert.equal(sectionLabel({ id: "all", data: null }), "all");
    });
});

describe("mapIndexPath", () => {
    test("follows items through deletes, inserts and moves", () => {
        const change = changeset({
            sections: { inserted: [{ index: 0, id: "n", items: [] }] },
            items: {
                deleted: [{ at: [0, 0], id: "a" }],
                inserted: [{ at: [2, 0], id: "c" }],
                moved: [{ from: [1, 0], to: [1, 0], id: "m" }],
            },
        });
        assert.equal(mapIndexPath(change, [0, 0]), null);
        assert.deepEqual(mapIndexPath(change, [0, 1]), [1, 1]);
        assert.deepEqual(mapIndexPath(change, [1, 0]), [1, 0]);
        assert.deepEqual(mapIndexPath(change, [1, 1]), [2, 1]);
        const deletedSection = changeset({ sections: { deleted: [{ index: 0, id: "s" }] } });
        assert.equal(mapIndexPath(deletedSection, [0, 3]), null);
        assert.deepEqual(mapIndexPath(deletedSection, [1, 3]), [0, 3]);
    });
});

describe("backoff", () => {
    test("full jitter under a doubling, capped ceiling; Retry-After is a floor", () => {
        for (let attempt = 0; attempt < 40; attempt += 1) {
            const ceiling = Math.min(1000, 100 * 2 ** attempt);
            assert.equal(backoffDelay(attempt, { baseMs: 100, capMs: 1000, random: () => 0.999999 }) <= ceiling, true);
            assert.equal(backoffDelay(attempt, { baseMs: 100, capMs: 1000, random: () => 0 }), 0);
        }
        assert.equal(backoffDelay(0, { baseMs: 100, capMs: 1000, retryAfter: 2, random: () => 0.5 }), 2000);
        assert.equal(retryAfterSeconds("3"), 3);
        assert.equal(retryAfterSeconds(new Date(Date.now() + 5000).toUTCString(), Date.now()) > 3, true);
        assert.equal(retryAfterSeconds(null), null);
    });

    test("the loop retries 503 and network errors, honours Retry-After, and stops on unsubscribe", async () => {
        const snapshot = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } };
        const answers = [
            () => Promise.reject(new TypeError("network down")),
            () => new Response(JSON.stringify({ error: { code: "shutting_down" } }), { status: 503, headers: { "Retry-After": "1" } }),
            () => new Response(JSON.stringify(snapshot), { status: 200 }),
            () =>
                new Response(
                    JSON.stringify({ collection: "c", from: "x.9", to: "x.10", changes: empty() }), // not from e.1: never applied
                    { status: 200 }
                ),
            () => new Response(JSON.stringify(snapshot), { status: 200 }),
        ];
        const requests = [];
        const times = [];
        const fakeFetch = (url, init) => {
            requests.push(url);
            times.push(Date.now());
            const answer = answers.shift();
            if (answer) return answer();
            return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
        };
        const snapshots = [];
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onSnapshot: (s) => snapshots.push(s.version),
            onStatus: (status) => statuses.push(status),
            onChangeset: () => assert.fail("a changeset from another version was applied"),
        }, { fetch: fakeFetch, baseMs: 10, capMs: 50 });
        const deadline = Date.now() + 5000;
        while (requests.length < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        assert.equal(requests.length, 6, "requests made");
        assert.equal(times[2] - times[1] >= 950, true, "Retry-After: 1 was honoured");
        assert.deepEqual(snapshots, ["e.1", "e.1"]);
        assert.equal(requests[3], "http://test/v1/collections/c/changes?since=e.1&timeout=25");
        assert.equal(requests[4], "http://test/v1/collections/c/changes?timeout=25", "a changeset of another version starts over");
        await subscription.unsubscribe();
        assert.equal(statuses.at(-1), "stopped");
        assert.deepEqual(statuses.slice(0, 3), ["connecting", "retrying", "retrying"]);
    });

    test("transport sse: follows reset, changes and gone events, and falls back to polling when no stream opens", async () => {
        const FakeEventSource = fakeEventSourceClass();
        const requests = [];
        const fakeFetch = (url, init) => {
            requests.push(url);
            return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
        };
        const changesets = [];
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onChangeset: ({ from, to }) => changesets.push(`${from}>${to}`),
            onStatus: (status, detail) => statuses.push(detail?.reason ? `${status}:${detail.reason}` : status),
        }, { transport: "sse", EventSource: FakeEventSource, fetch: fakeFetch });
        const [first] = FakeEventSource.instances;
        assert.equal(first.url, "http://test/v1/collections/c/changes");
        first.emit("open");
        first.emit("reset", { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } });
        first.emit("changes", { collection: "c", from: "e.1", to: "e.2", changes: changeset({ items: { inserted: [{ at: [0, 1], id: "y", data: null }] } }) });
        assert.equal(ids(subscription.sections), "a:x,y");
        assert.equal(subscription.version, "e.2");
        first.emit("changes", { collection: "c", from: "e.7", to: "e.8", changes: empty() }); // not from e.2: start over
        assert.equal(first.readyState, 2);
        const second = FakeEventSource.instances[1];
        assert.equal(second.url, "http://test/v1/collections/c/changes");
        second.readyState = 2;
        second.emit("error", {}); // closed before it opened: no stream to be had, poll instead
        const deadline = Date.now() + 2000;
        while (requests.length < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        assert.deepEqual(requests, ["http://test/v1/collections/c/changes?timeout=25"]);
        await subscription.unsubscribe();
        assert.deepEqual(changesets, ["e.1>e.2"]);
        assert.deepEqual(statuses, ["connecting", "live", "reset:mismatch", "stopped"]);
    });

    test("transport sse: a stream with no event for silenceSeconds is reopened from the client's version", async () => {
        // EventSource has no read timeout and shows no heartbeat (a comment): a stream a proxy stopped forwarding
        // without closing it stayed "live" with stale data for good.
        const SilentEventSource = fakeEventSourceClass();
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status, detail) => statuses.push(detail?.reason ? `${status}:${detail.reason}` : status),
        }, { transport: "sse", EventSource: SilentEventSource, silenceSeconds: 0.2 });
        const [first] = SilentEventSource.instances;
        first.emit("open");
        first.emit("reset", { collection: "c", reset: true, to: "e.4", snapshot: { collection: "c", version: "e.4", sections: [S("a", "x")] } });
        const waitFor = async (count) => {
            const deadline = Date.now() + 3000;
            while (SilentEventSource.instances.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        };
        await waitFor(2);
        assert.equal(first.readyState, 2, "the silent stream is closed");
        const second = SilentEventSource.instances[1];
        assert.equal(second.url, "http://test/v1/collections/c/changes?since=e.4");
        // An event restarts the wait: a stream that delivers is left alone for silenceSeconds after each one.
        second.emit("open");
        second.emit("changes", { collection: "c", from: "e.4", to: "e.5", changes: changeset({ items: { inserted: [{ at: [0, 1], id: "y", data: null }] } }) });
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.equal(SilentEventSource.instances.length, 2);
        await waitFor(3);
        assert.equal(SilentEventSource.instances[2].url, "http://test/v1/collections/c/changes?since=e.5");
        await subscription.unsubscribe();
        assert.equal(SilentEventSource.instances.at(-1).readyState, 2);
        assert.equal(ids(subscription.sections), "a:x,y");
        assert.deepEqual(statuses, ["connecting", "live", "stopped"]);
    });

    test("transport sse: a stream reopened after a silence that gets no answer reports retrying until one opens", async () => {
        // A network or proxy that swallows requests without refusing them: EventSource waits for the answer's
        // headers with no error, and the page showed "live" over stale data until the network came back.
        const SwallowedEventSource = fakeEventSourceClass();
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status, detail) => statuses.push(detail?.reason ? `${status}:${detail.reason}` : status),
        }, { transport: "sse", EventSource: SwallowedEventSource, silenceSeconds: 0.4 });
        const [first] = SwallowedEventSource.instances;
        first.emit("open");
        first.emit("reset", { collection: "c", reset: true, to: "e.4", snapshot: { collection: "c", version: "e.4", sections: [S("a", "x")] } });
        const waitFor = async (count) => {
            const deadline = Date.now() + 3000;
            while (SwallowedEventSource.instances.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        };
        await waitFor(2);
        assert.deepEqual(statuses, ["connecting", "live"], "a stream that was open is reopened without a status");
        // Its successor has not opened half a silence later: the first "retrying"; still not at its own silence:
        // the second, and a third stream.
        await waitFor(3);
        assert.deepEqual(statuses, ["connecting", "live", "retrying:silence", "retrying:silence"]);
        const third = SwallowedEventSource.instances[2];
        assert.equal(third.url, "http://test/v1/collections/c/changes?since=e.4");
        third.emit("open");
        await subscription.unsubscribe();
        assert.deepEqual(statuses, ["connecting", "live", "retrying:silence", "retrying:silence", "live", "stopped"]);
    });

    test("transport sse: a stream given up after it delivered (a proxy's 502 in a restart) is opened again once a poll is answered", async () => {
        // EventSource gives a stream up for good on an HTTP error: behind nginx or Varnish, one restart of the
        // server turned every stream into long-polling for the page's life.
        const FakeEventSource = fakeEventSourceClass();
        const answers = [
            [502, { error: { code: "bad_gateway" } }],
            [200, { collection: "c", from: "e.1", to: "e.1", changes: empty() }],
        ];
        const requests = [];
        const fakeFetch = scriptedFetch(answers, requests);
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status, detail) => statuses.push(detail?.reason ? `${status}:${detail.reason}` : status),
        }, { transport: "sse", EventSource: FakeEventSource, fetch: fakeFetch, baseMs: 5, capMs: 10 });
        try {
            const [first] = FakeEventSource.instances;
            first.emit("open");
            first.emit("reset", { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } });
            first.readyState = 2;
            first.emit("error", {});
            const deadline = Date.now() + 2000;
            while (FakeEventSource.instances.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
            assert.equal(FakeEventSource.instances.length, 2, "the stream was not opened again");
            assert.equal(FakeEventSource.instances[1].url, "http://test/v1/collections/c/changes?since=e.1");
            // The polls between are short ones: the first after the stream, and the one after the 502.
            const base = "http://test/v1/collections/c/changes?";
            assert.deepEqual(requests, [`${base}since=e.1&timeout=0`, `${base}since=e.1&timeout=0`]);
            FakeEventSource.instances[1].emit("open");
        } finally {
            await subscription.unsubscribe();
        }
        assert.deepEqual(statuses, ["connecting", "live", "retrying:HTTP 502", "live", "stopped"]);
    });

    test("transport sse: streams refused before any event are tried again after a growing wait, not after every poll", async () => {
        const FakeEventSource = fakeEventSourceClass();
        const requests = [];
        // Every poll answered at once with a changeset (an empty one, to the next version): no quick-empty waits.
        const fakeFetch = (url) => {
            requests.push(url);
            const n = requests.length;
            const body = n === 1
                ? { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } }
                : { collection: "c", from: `e.${n - 1}`, to: `e.${n}`, changes: empty() };
            return Promise.resolve(new Response(JSON.stringify(body), { status: 200 }));
        };
        const subscription = subscribe("http://test", "c", {}, { transport: "sse", EventSource: FakeEventSource, fetch: fakeFetch });
        try {
            const refused = FakeEventSource.instances[0];
            refused.readyState = 2;
            refused.emit("error", {});
            const started = Date.now();
            while (requests.length < 20 && Date.now() - started < 1500) await new Promise((resolve) => setTimeout(resolve, 5));
            // Twenty answered polls within a second and a half of one refusal: the next stream waits 2 s.
            if (Date.now() - started < 1500) assert.equal(FakeEventSource.instances.length, 1);
            assert.equal(requests.length >= 20, true, `${requests.length} polls`);
        } finally {
            await subscription.unsubscribe();
        }
    });

    test("after a 410 collection_deleted, a snapshot of the deleted epoch (a cache's copy) is waited out, not shown", async () => {
        const reset = (to, ...items) => ({ collection: "c", reset: true, to, snapshot: { collection: "c", version: to, sections: [S("a", ...items)] } });
        const answers = [
            [200, reset("e.1", "x")],
            [410, { error: { code: "collection_deleted", message: "deleted" } }],
            [200, reset("e.1", "x")], // shared for 2 s by a cache, from before the deletion
            [200, reset("e.1", "x")],
            [404, { error: { code: "collection_not_found", message: "none" } }],
            [200, reset("f.1", "new")],
        ];
        const requests = [];
        const fakeFetch = scriptedFetch(answers, requests);
        const snapshots = [];
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onSnapshot: ({ version, sections }) => snapshots.push(`${version} ${ids(sections)}`),
            onStatus: (status) => statuses.push(status),
        }, { fetch: fakeFetch, baseMs: 5, capMs: 10, missingRetryMs: 10 });
        const deadline = Date.now() + 3000;
        while (answers.length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        await new Promise((resolve) => setTimeout(resolve, 20));
        await subscription.unsubscribe();
        assert.deepEqual(snapshots, ["e.1 a:x", "f.1 a:new"]);
        assert.deepEqual(statuses, ["connecting", "live", "reset", "missing", "live", "stopped"]);
        assert.equal(subscription.version, "f.1");
    });

    test("a 200 cut short (no body) is a failed connection: polled again from the same version, the mirror kept", async () => {
        const reset = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [S("s", "a")] } };
        const changes = { collection: "c", from: "e.1", to: "e.2", next: "since=e.2&timeout=25", changes: changeset({ items: { deleted: [{ at: [0, 0], id: "a" }] } }) };
        const answers = [[200, reset], () => Promise.resolve(new Response("", { status: 200 })), [200, changes]];
        const requests = [];
        const snapshots = [];
        const statuses = [];
        const applied = [];
        const subscription = subscribe("http://test", "c", {
            onSnapshot: ({ version }) => snapshots.push(version),
            onChangeset: ({ to }) => applied.push(to),
            onStatus: (status) => statuses.push(status),
        }, { fetch: scriptedFetch(answers, requests), baseMs: 5, capMs: 10 });
        const deadline = Date.now() + 3000;
        while (applied.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        await subscription.unsubscribe();
        assert.deepEqual(snapshots, ["e.1"], "the mirror was not thrown away");
        assert.deepEqual(applied, ["e.2"], `${statuses} ${requests}`);
        // From the same version, by the short poll that follows a failure.
        assert.equal(requests[2], "http://test/v1/collections/c/changes?since=e.1&timeout=0");
        assert.ok(!statuses.includes("reset"), `${statuses}`);
    });

    test("transport sse: a reset of the deleted epoch after a gone event is waited out", async () => {
        const FakeEventSource = fakeEventSourceClass();
        const snapshots = [];
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onSnapshot: ({ version }) => snapshots.push(version),
            onStatus: (status) => statuses.push(status),
        }, { transport: "sse", EventSource: FakeEventSource, baseMs: 5, capMs: 10 });
        try {
            const reset = (to) => ({ collection: "c", reset: true, to, snapshot: { collection: "c", version: to, sections: [] } });
            FakeEventSource.instances[0].emit("open");
            FakeEventSource.instances[0].emit("reset", reset("e.4"));
            FakeEventSource.instances[0].emit("gone", { error: { code: "collection_deleted" } });
            const second = FakeEventSource.instances[1];
            assert.equal(second.url, "http://test/v1/collections/c/changes");
            second.emit("open");
            second.emit("reset", reset("e.4")); // a server that has not applied the deletion yet
            assert.equal(second.readyState, 2);
            assert.equal(subscription.sections, null, "the deleted content is not shown");
            const deadline = Date.now() + 2000;
            while (FakeEventSource.instances.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
            FakeEventSource.instances[2].emit("open");
            FakeEventSource.instances[2].emit("reset", reset("g.1"));
        } finally {
            await subscription.unsubscribe();
        }
        assert.deepEqual(snapshots, ["e.4", "g.1"]);
        assert.deepEqual(statuses, ["connecting", "live", "reset", "missing", "live", "stopped"]);
    });

    test("five subscriptions open to one plain-http origin warn once that the browser's six connections run out", async () => {
        const warnings = [];
        const warn = console.warn;
        console.warn = (message) => warnings.push(message);
        const open = [];
        const follow = (origin, count) => {
            for (let index = 0; index < count; index += 1) open.push(subscribe(origin, `c${index}`, {}, { fetch: scriptedFetch([]) }));
        };
        try {
            // HTTPS may be HTTP/2, which carries every subscription on one connection.
            follow("https://secure.test", 6);
            // Subscriptions that ended are not counted: a page that follows others in turn is not warned.
            follow("http://turns.test", 4);
            await Promise.all(open.splice(6).map((subscription) => subscription.unsubscribe()));
            follow("http://turns.test", 4);
            assert.deepEqual(warnings, []);
            follow("http://many.test", 5);
            assert.equal(warnings.length, 1);
            assert.match(warnings[0], /^changefeed\.js: 5 subscriptions to http:\/\/many\.test are open in this page\./);
            follow("http://many.test", 1);
            assert.equal(warnings.length, 1, "once per origin");
        } finally {
            console.warn = warn;
            await Promise.all(open.map((subscription) => subscription.unsubscribe()));
        }
    });

    test("after a failure the next poll is a short one, so the client is live as soon as the server answers", async () => {
        const answers = [
            () => Promise.resolve(new Response(JSON.stringify({ collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } }), { status: 200 })),
            () => Promise.reject(new TypeError("network down")),
            () => Promise.resolve(new Response(JSON.stringify({ collection: "c", from: "e.1", to: "e.1", next: "since=e.1&timeout=0&cursor=5", changes: empty() }), { status: 200 })),
        ];
        const requests = [];
        const fakeFetch = scriptedFetch(answers, requests);
        const statuses = [];
        const subscription = subscribe("http://test", "c", { onStatus: (status) => statuses.push(status) }, { fetch: fakeFetch, baseMs: 5, capMs: 10 });
        const deadline = Date.now() + 2000;
        while (requests.length < 4 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        await subscription.unsubscribe();
        const base = "http://test/v1/collections/c/changes?";
        assert.deepEqual(requests, [
            `${base}timeout=25`,
            `${base}since=e.1&timeout=25`,
            `${base}since=e.1&timeout=0`,
            // The answer's next keeps the short poll's timeout, and a cursor counted in seconds: the poll after it
            // holds again, without that cursor, which would keep it apart from other clients' polls.
            `${base}since=e.1&timeout=25`,
        ]);
        assert.deepEqual(statuses, ["connecting", "live", "retrying", "live", "stopped"]);
    });

    test("the short polls after failures do not end the backoff: a server refusing held polls (429) is not hammered", async () => {
        // The server answers timeout=0 whatever --max-held-polls says; its 200 ended the backoff, and the next held
        // poll's 429 came at once: about two requests a second for good.
        const reset = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } };
        const requests = [];
        const fakeFetch = (url) => {
            requests.push(url);
            if (requests.length === 1) return Promise.resolve(new Response(JSON.stringify(reset), { status: 200 }));
            const short = new URL(url).searchParams.get("timeout") === "0";
            const [body, status] = short
                ? [{ collection: "c", from: "e.1", to: "e.1", changes: empty() }, 200]
                : [{ error: { code: "too_many_polls", message: "busy" } }, 429];
            return Promise.resolve(new Response(JSON.stringify(body), { status }));
        };
        const attempts = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status, detail) => status === "retrying" && attempts.push(detail.attempt),
        }, { fetch: fakeFetch, baseMs: 1, capMs: 20 });
        try {
            const deadline = Date.now() + 3000;
            while (attempts.length < 5 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        } finally {
            await subscription.unsubscribe();
        }
        assert.deepEqual(attempts.slice(0, 5), [1, 2, 3, 4, 5]);
    });

    test("a snapshot at the deleted epoch is taken after 10 s: the epoch came back, and the client is not missing for good", async () => {
        const reset = (to) => ({ collection: "c", reset: true, to, snapshot: { collection: "c", version: to, sections: [] } });
        let answered = 0;
        const fakeFetch = (url, init) => {
            answered += 1;
            // Resets always at e.1; the poll after the first is told the collection was deleted.
            if (new URL(url).searchParams.has("since") && answered > 2) {
                return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
            }
            const [body, status] = answered === 2 ? [{ error: { code: "collection_deleted" } }, 410] : [reset("e.1"), 200];
            return Promise.resolve(new Response(JSON.stringify(body), { status }));
        };
        const realNow = Date.now;
        let skew = 0;
        Date.now = () => realNow() + skew;
        const snapshots = [];
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onSnapshot: ({ version }) => snapshots.push(version),
            onStatus: (status) => statuses.push(status),
        }, { fetch: fakeFetch, baseMs: 1, capMs: 5 });
        try {
            const deadline = realNow() + 2000;
            while (!statuses.includes("missing") && realNow() < deadline) await new Promise((resolve) => setTimeout(resolve, 2));
            assert.deepEqual(snapshots, ["e.1"], "a stale snapshot was shown");
            skew = 11_000;
            while (snapshots.length < 2 && realNow() < deadline) await new Promise((resolve) => setTimeout(resolve, 2));
        } finally {
            Date.now = realNow;
            await subscription.unsubscribe();
        }
        assert.deepEqual(snapshots, ["e.1", "e.1"]);
        assert.deepEqual(statuses, ["connecting", "live", "reset", "missing", "live", "stopped"]);
    });

    test("a hidden page (pagehide: the back/forward cache) lets its held poll go, and polls again when shown", async () => {
        const { page, restore } = browserPage();
        const requests = [];
        const aborted = [];
        const fakeFetch = (url, init) => {
            requests.push(url);
            if (requests.length === 1) {
                const reset = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } };
                return Promise.resolve(new Response(JSON.stringify(reset), { status: 200 }));
            }
            return new Promise((_, reject) =>
                init.signal.addEventListener("abort", () => {
                    aborted.push(url);
                    reject(new DOMException("aborted", "AbortError"));
                }));
        };
        const errors = [];
        const subscription = subscribe("http://test", "c", { onError: (error) => errors.push(error) }, { fetch: fakeFetch });
        const waitFor = async (check) => {
            const deadline = Date.now() + 2000;
            while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        };
        try {
            await waitFor(() => requests.length === 2);
            page.dispatchEvent(new Event("pagehide"));
            await waitFor(() => aborted.length === 1);
            await new Promise((resolve) => setTimeout(resolve, 100));
            assert.equal(requests.length, 2, "a hidden page polls no more");
            page.dispatchEvent(new Event("pageshow"));
            await waitFor(() => requests.length === 3);
        } finally {
            await subscription.unsubscribe();
            restore();
        }
        const base = "http://test/v1/collections/c/changes?";
        assert.deepEqual(requests, [`${base}timeout=25`, `${base}since=e.1&timeout=25`, `${base}since=e.1&timeout=25`]);
        assert.deepEqual(aborted.slice(0, 1), [`${base}since=e.1&timeout=25`]);
        assert.deepEqual(errors, [], "hiding the page is no error");
    });

    test("transport sse: a hidden page closes its stream, and opens one from its version when shown", async () => {
        const { page, restore } = browserPage();
        const FakeEventSource = fakeEventSourceClass();
        const requests = [];
        const fakeFetch = (url) => {
            requests.push(url);
            return Promise.reject(new TypeError("no polls in this test"));
        };
        const subscription = subscribe("http://test", "c", {}, { transport: "sse", EventSource: FakeEventSource, fetch: fakeFetch });
        try {
            const [first] = FakeEventSource.instances;
            first.emit("open");
            first.emit("reset", { collection: "c", reset: true, to: "e.3", snapshot: { collection: "c", version: "e.3", sections: [] } });
            page.dispatchEvent(new Event("pagehide"));
            assert.equal(first.readyState, 2, "the stream is closed");
            await new Promise((resolve) => setTimeout(resolve, 50));
            assert.equal(FakeEventSource.instances.length, 1, "no stream while hidden");
            page.dispatchEvent(new Event("pageshow"));
            const deadline = Date.now() + 2000;
            while (FakeEventSource.instances.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
            assert.equal(FakeEventSource.instances[1]?.url, "http://test/v1/collections/c/changes?since=e.3");
            assert.deepEqual(requests, [], "no poll in between");
        } finally {
            await subscription.unsubscribe();
            restore();
        }
    });

    test("transport sse with a token long-polls (EventSource sends no Authorization)", async () => {
        const requests = [];
        const fakeFetch = (url, init) => {
            requests.push([url, init.headers.Authorization]);
            return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
        };
        const subscription = subscribe("http://test", "c", {}, {
            transport: "sse", token: "t", fetch: fakeFetch,
            EventSource: class {
                constructor() {
                    assert.fail("no EventSource with a token");
                }
            },
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        await subscription.unsubscribe();
        assert.deepEqual(requests, [["http://test/v1/collections/c/changes?timeout=25", "Bearer t"]]);
    });

    test("a 404 saying the collection is not there is missing; a 404 of no such route is an error", async () => {
        const answers = [
            [404, { error: { code: "route_not_found", message: "No route." } }],
            [404, { error: { code: "collection_not_found", message: "none" } }],
        ];
        const fakeFetch = scriptedFetch(answers);
        const statuses = [];
        const errors = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status) => statuses.push(status),
            onError: (error) => errors.push(error),
        }, { fetch: fakeFetch, baseMs: 1, capMs: 5, missingRetryMs: 10 });
        const deadline = Date.now() + 2000;
        while (!statuses.includes("missing") && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        await subscription.unsubscribe();
        assert.deepEqual(statuses, ["connecting", "retrying", "missing", "stopped"]);
        assert.equal(errors.length, 1);
        assert.equal(errors[0].status, 404);

        // A view's 404 says view_not_found.
        const viewStatuses = [];
        const missingView = () => Promise.resolve(new Response(JSON.stringify({ error: { code: "view_not_found" } }), { status: 404 }));
        const view = subscribe("http://test", "v", { onStatus: (status) => viewStatuses.push(status) }, { kind: "view", fetch: missingView, missingRetryMs: 10 });
        const viewDeadline = Date.now() + 2000;
        while (!viewStatuses.includes("missing") && Date.now() < viewDeadline) await new Promise((resolve) => setTimeout(resolve, 5));
        await view.unsubscribe();
        assert.deepEqual(viewStatuses, ["connecting", "missing", "stopped"]);
    });

    test("kind view follows /v1/views/NAME, polling and streaming; another kind is refused at once", async () => {
        const view = { view: "top scores", reset: true, to: "v.3", snapshot: { view: "top scores", version: "v.3", sections: [S("a", "x")] } };
        const requests = [];
        const fakeFetch = (url, init) => {
            requests.push(url);
            if (requests.length === 1) return Promise.resolve(new Response(JSON.stringify(view), { status: 200 }));
            return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
        };
        const snapshots = [];
        const polled = subscribe("http://test", "top scores", { onSnapshot: (s) => snapshots.push(s) }, { kind: "view", fetch: fakeFetch });
        const deadline = Date.now() + 2000;
        while (requests.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        await polled.unsubscribe();
        assert.deepEqual(requests, [
            "http://test/v1/views/top%20scores/changes?timeout=25",
            "http://test/v1/views/top%20scores/changes?since=v.3&timeout=25",
        ]);
        assert.deepEqual(snapshots.map(({ version, collection, kind }) => [version, collection, kind]), [["v.3", "top scores", "view"]]);

        const FakeEventSource = fakeEventSourceClass();
        const streamed = subscribe("http://test", "top scores", {}, { kind: "view", transport: "sse", EventSource: FakeEventSource });
        const [first] = FakeEventSource.instances;
        assert.equal(first.url, "http://test/v1/views/top%20scores/changes");
        first.emit("open");
        first.emit("reset", view);
        first.emit("gone", { error: { code: "collection_deleted" } });
        assert.equal(FakeEventSource.instances.length, 2);
        assert.equal(FakeEventSource.instances[1].url, "http://test/v1/views/top%20scores/changes");
        await streamed.unsubscribe();

        assert.throws(() => subscribe("http://test", "c", {}, { kind: "views" }), TypeError);
    });

    test("the loop polls with the server's next: its cursor after an empty answer, its since after changes", async () => {
        const snapshot = { collection: "c", reset: true, to: "e.1", next: "since=e.1&timeout=7", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } };
        const inserted = changeset({ items: { inserted: [{ at: [0, 1], id: "y", data: null }] } });
        const answers = [
            { ...snapshot },
            { collection: "c", from: "e.1", to: "e.1", next: "since=e.1&timeout=7&cursor=41", changes: empty() },
            { collection: "c", from: "e.1", to: "e.1", next: "since=e.1&timeout=7&cursor=42", changes: empty() },
            { collection: "c", from: "e.1", to: "e.2", next: "since=e.2&timeout=7", changes: inserted },
            { collection: "c", from: "e.2", to: "e.2", next: "since=e.9&timeout=7&cursor=1", changes: empty() }, // not from e.2: ignored
        ];
        const requests = [];
        const fakeFetch = (url, init) => {
            requests.push(url);
            const answer = answers.shift();
            if (answer) return Promise.resolve(new Response(JSON.stringify(answer), { status: 200 }));
            return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
        };
        // Timeout 1 (the least; 0 is sent as 1): the empty answers come quick, the second after a short wait.
        const subscription = subscribe("http://test", "c", {}, { fetch: fakeFetch, timeout: 0, baseMs: 20, capMs: 40 });
        const deadline = Date.now() + 5000;
        while (requests.length < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        await subscription.unsubscribe();
        const base = "http://test/v1/collections/c/changes?";
        assert.deepEqual(requests, [
            `${base}timeout=1`,
            `${base}since=e.1&timeout=7`,
            `${base}since=e.1&timeout=7&cursor=41`,
            `${base}since=e.1&timeout=7&cursor=42`,
            `${base}since=e.2&timeout=7`,
            `${base}since=e.2&timeout=1`,
        ]);
        assert.equal(ids(subscription.sections), "a:x,y");
    });

    test("a quick empty answer is re-polled at once, more in a row back off", () => {
        assert.equal(isQuickEmptyAnswer(4999, 10), true);
        assert.equal(isQuickEmptyAnswer(5000, 10), false, "held half its timeout");
        assert.equal(isQuickEmptyAnswer(149000, 600), true, "the server's clamp: 300 s");
        assert.equal(isQuickEmptyAnswer(0, 0), false, "timeout 0 is never quick");
        assert.equal(quickEmptyWait(0), 0);
        assert.equal(quickEmptyWait(1), 0, "the first: at once");
        const backoff = { baseMs: 100, capMs: 1000, random: () => 1 };
        assert.deepEqual([2, 3, 4, 7, 20].map((n) => quickEmptyWait(n, backoff)), [100, 200, 400, 1000, 1000]);
    });

    test("a silent server is given up after silenceSeconds, a slow body that keeps flowing is not", async () => {
        const snapshot = JSON.stringify({ collection: "c", reset: true, to: "e.1", next: "since=e.1&timeout=1", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } });
        const asked = [];
        const server = http.createServer((request, response) => {
            asked.push(request.url);
            if (asked.length === 1) return; // accepted, never answered
            response.writeHead(200, { "Content-Type": "application/json" });
            if (asked.length === 2) {
                // The snapshot in six pieces 200 ms apart: 1.2 s in all, each pause under the 0.5 s of silence.
                const pieces = Array.from({ length: 6 }, (_, n) => snapshot.slice((n * snapshot.length) / 6, ((n + 1) * snapshot.length) / 6));
                const send = () => (pieces.length === 1 ? response.end(pieces.shift()) : (response.write(pieces.shift()), setTimeout(send, 200)));
                return send();
            }
            response.write(snapshot.slice(0, 10)); // begun, then silent
        });
        await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
        const errors = [];
        const snapshots = [];
        // Before subscribing: the first request, and its silence timer, start inside subscribe().
        const started = Date.now();
        const subscription = subscribe(`http://127.0.0.1:${server.address().port}`, "c", {
            onSnapshot: (s) => snapshots.push(s.version),
            onError: (error) => errors.push({ message: String(error), at: Date.now() }),
        }, { timeout: 1, silenceSeconds: 0.5, baseMs: 10, capMs: 20 });
        try {
            const deadline = started + 10000;
            while (errors.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
            assert.deepEqual(snapshots, ["e.1"], "the slow snapshot was read whole");
            assert.deepEqual(asked.slice(0, 3), ["/v1/collections/c/changes?timeout=1", "/v1/collections/c/changes?timeout=1", "/v1/collections/c/changes?since=e.1&timeout=1"]);
            assert.equal(errors.length, 2, "the unanswered request and the stalled body were given up");
            for (const error of errors) assert.match(error.message, /nothing from the server for 0\.5 s/);
            assert.ok(errors[0].at - started >= 450 && errors[0].at - started < 3000, `given up after ${errors[0].at - started} ms`);
        } finally {
            await subscription.unsubscribe();
            server.closeAllConnections();
            await new Promise((resolve) => server.close(resolve));
        }
    });

    test("a poll whose answer is late past its hold reports retrying while it waits, and live when it comes", async () => {
        const snapshot = { collection: "c", reset: true, to: "e.1", next: "since=e.1&timeout=1", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } };
        const asked = [];
        const fakeFetch = (_, init) => {
            asked.push(Date.now());
            if (asked.length === 1) return Promise.resolve(new Response(JSON.stringify(snapshot), { status: 200 }));
            const nothing = { collection: "c", from: "e.1", to: "e.1", next: `since=e.1&timeout=1&cursor=${asked.length}`, changes: empty() };
            // The first poll's answer begins 2.5 s after it was asked: 1.5 s past its hold of 1 s, where it is
            // late after 1 s (half of silenceSeconds) and given up after 2 s.
            const wait = asked.length === 2 ? 2500 : 60000;
            return new Promise((resolve, reject) => {
                const timer = setTimeout(() => resolve(new Response(JSON.stringify(nothing), { status: 200 })), wait);
                init.signal.addEventListener("abort", () => {
                    clearTimeout(timer);
                    reject(new DOMException("aborted", "AbortError"));
                });
            });
        };
        const statuses = [];
        const subscription = subscribe("http://test", "c", {
            onStatus: (status, detail) => statuses.push(detail?.reason ? `${status}:${detail.reason}` : status),
        }, { fetch: fakeFetch, timeout: 1, silenceSeconds: 2, baseMs: 10, capMs: 20 });
        const deadline = Date.now() + 8000;
        while (asked.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        await subscription.unsubscribe();
        assert.deepEqual(statuses, ["connecting", "live", "retrying:silence", "live", "stopped"]);
    });

    test("empty answers that come at once do not make the loop spin", async () => {
        const snapshot = { collection: "c", reset: true, to: "e.1", next: "since=e.1&timeout=10", snapshot: { collection: "c", version: "e.1", sections: [S("a", "x")] } };
        const times = [];
        const fakeFetch = () => {
            times.push(Date.now());
            const answer = times.length === 1 ? snapshot : { collection: "c", from: "e.1", to: "e.1", next: `since=e.1&timeout=10&cursor=${times.length}`, changes: empty() };
            return Promise.resolve(new Response(JSON.stringify(answer), { status: 200 }));
        };
        const subscription = subscribe("http://test", "c", {}, { fetch: fakeFetch, timeout: 10, baseMs: 20, capMs: 100 });
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await subscription.unsubscribe();
        // The backoff (20 ms doubling to 100 ms, full jitter) averages about 50 ms a wait once capped: some 20 to
        // 40 polls in a second. A loop that spun would make thousands.
        assert.ok(times.length >= 3 && times.length < 80, `${times.length} polls in a second`);
    });

    test("a timeout under a second is sent as 1: with timeout=0 every empty answer came at once and none was quick", async () => {
        assert.deepEqual([0, 0.5, 1, 25.9, 600, "x"].map(pollSeconds), [1, 1, 1, 25, 300, 25]);
        const snapshot = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } };
        const requests = [];
        const fakeFetch = (url) => {
            requests.push(url);
            const answer = requests.length === 1 ? snapshot : { collection: "c", from: "e.1", to: "e.1", changes: empty() };
            return Promise.resolve(new Response(JSON.stringify(answer), { status: 200 }));
        };
        const subscription = subscribe("http://test", "c", {}, { fetch: fakeFetch, timeout: 0, baseMs: 20, capMs: 100 });
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await subscription.unsubscribe();
        assert.equal(requests[0], "http://test/v1/collections/c/changes?timeout=1");
        assert.ok(requests.length >= 3 && requests.length < 80, `${requests.length} polls in a second`);
    });

    test("410s in a row, each after its reset, back off: a cache serving a stale reset cannot make the loop spin", async () => {
        const snapshot = { collection: "c", reset: true, to: "e.1", snapshot: { collection: "c", version: "e.1", sections: [] } };
        const gone = { error: { code: "cursor_expired", message: "expired", current: "e.9" } };
        const requests = [];
        const fakeFetch = (url) => {
            requests.push(url);
            const [body, status] = requests.length % 2 === 1 ? [snapshot, 200] : [gone, 410];
            return Promise.resolve(new Response(JSON.stringify(body), { status }));
        };
        const subscription = subscribe("http://test", "c", {}, { fetch: fakeFetch, baseMs: 20, capMs: 100 });
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await subscription.unsubscribe();
        // The first start over is at once, the next ones wait 20 ms doubling to 100 ms (full jitter): some 20 to
        // 80 requests in a second. Without the waits: thousands.
        assert.ok(requests.length >= 4 && requests.length < 160, `${requests.length} requests in a second`);
    });
});

/**
 * Every item that survives is where mapIndexPath says it is; an item it loses was deleted, or its section was
 * deleted (or sent as a delete plus an insert), or it was listed as an item delete (docs/changesets.md#rule-3).
 */
function checkMapIndexPath(changes, before, after, context) {
    const where = new Set(after.flatMap((section) => section.items.map((item) => item.id)));
    before.forEach((section, s) =>
        section.items.forEach((item, i) => {
            const mapped = mapIndexPath(changes, [s, i]);
            if (mapped) {
                assert.equal(after[mapped[0]]?.items[mapped[1]]?.id, item.id, `${context}: mapIndexPath of ${item.id}`);
            } else {
                const explained =
                    !where.has(item.id) ||
                    changes.items.deleted.some((entry) => entry.id === item.id) ||
                    changes.sections.deleted.some((entry) => entry.index === s);
                assert.ok(explained, `${context}: mapIndexPath lost ${item.id}`);
            }
        })
    );
}

/**
 * The examples of docs/changesets.md, each `{title, before, after, changeset}`: its `json before`, `json after`
 * and `json changeset` blocks, titled by the heading above them.
 */
function documentedExamples() {
    const text = readFileSync(new URL("../../../docs/changesets.md", import.meta.url), "utf8");
    const examples = [];
    let title = null;
    let blocks = {};
    for (const match of text.matchAll(/^#+ (.+)$|^```json (before|after|changeset)\n([\s\S]*?)^```$/gm)) {
        if (match[1]) {
            title = match[1];
            continue;
        }
        blocks[match[2]] = JSON.parse(match[3]);
        if (match[2] === "changeset") {
            examples.push({ title, ...blocks });
            blocks = {};
        }
    }
    return examples;
}

const examples = documentedExamples();

describe("docs/changesets.md", () => {
    test("has its six examples, each a before, an after and a changeset", () => {
        assert.deepEqual(
            examples.map((example) => [example.title, Boolean(example.before && example.after && example.changeset)]),
            ["Coordinates", "Rule 1", "Rule 2", "Rule 3", "Rule 4", "Rule 5"].map((title) => [title, true])
        );
    });

    test("every example's changeset takes its before to its after", () => {
        for (const { title, before, after, changeset } of examples) {
            const result = applyChangeset(JSON.parse(normalized(before)), changeset);
            assert.equal(normalized(result), normalized(after), title);
        }
    });
});

const binary = serverBinary();

describe("against a real server", { skip: binary ? false : "no ChangeServer binary (set CF_SERVER_BINARY)" }, () => {
    let server;
    before(async () => {
        server = await startServer({ args: ["--history", "50"] });
    });
    after(async () => {
        await server?.stop();
    });

    test("writer: every write of the contract, its answer, and its refusals with code, op and outcome", async () => {
        const api = writer(`${server.url}/`);
        const refused = async (promise) => {
            try {
                await promise;
            } catch (error) {
                assert.ok(error instanceof WriteError, String(error));
                assert.equal(error.outcomeUnknown, false, `the server said what it did: ${error.message}`);
                return error;
            }
            assert.fail("the write was taken");
        };
        const created = await api.replace("board", [{ id: "todo", data: { title: "To do" }, items: [{ id: "a" }] }]);
        assert.equal(created.created, true);
        assert.equal(created.changes.from, created.version.replace(/\.1$/, ".0"));
        const column = await api.mutate("board", [{ op: "insertSections", at: 1, sections: [{ id: "done", items: [] }] }]);
        assert.equal(column.changes.sections.inserted[0].id, "done");
        const moved = await api.mutate("board", [{ op: "moveItem", item: "a", to: ["done", 0] }], { ifMatch: column.version });
        assert.deepEqual(moved.changes.items.moved, [{ from: [0, 0], to: [1, 0], id: "a" }]);

        const stale = await refused(api.mutate("board", [{ op: "moveItem", item: "a", to: ["todo", 0] }], { ifMatch: column.version }));
        assert.equal(stale.status, 412);
        assert.equal(stale.code, "precondition_failed");
        assert.equal(stale.current, moved.version, "the refusal names the version the collection is at");
        // A response's ETag (quoted already) names the version as the body's `version` does.
        const tag = (await call(server.url, "GET", "/v1/collections/board")).headers.get("etag");
        assert.equal(tag, `"${moved.version}"`);
        const tagged = await api.upsert("board", "t", { section: "todo" }, { ifMatch: tag });
        assert.equal(tagged.created, true);
        assert.equal((await refused(api.upsert("board", "t", {}, { ifMatch: tag }))).status, 412);
        assert.equal((await refused(api.upsert("board", "t", {}, { ifNoneMatch: tagged.version }))).status, 412);
        assert.equal((await refused(api.upsert("board", "t", {}, { ifNoneMatch: `W/"${tagged.version}"` }))).status, 412);
        assert.deepEqual((await api.deleteItem("board", "t", { ifMatch: `"${tagged.version}"` })).changes.items.deleted.map((entry) => entry.id), ["t"]);
        // A subscription's version while the collection is missing is null: no request is sent.
        for (const value of [null, "", 3]) {
            await assert.rejects(api.deleteItem("board", "a", { ifMatch: value }), TypeError, String(value));
            await assert.rejects(api.replace("board", [], { ifNoneMatch: value }), TypeError, String(value));
        }
        assert.equal((await call(server.url, "GET", "/v1/collections/board/items/a")).status, 200);
        const rejected = await refused(api.mutate("board", [{ op: "updateSection", section: "done", data: 1 }, { op: "deleteItems", items: ["nope"] }]));
        assert.deepEqual([rejected.status, rejected.code, rejected.op], [409, "item_not_found", 1]);
        assert.equal((await refused(api.replace("board", [], { ifNoneMatch: "*" }))).status, 412);
        assert.equal((await refused(api.upsert("nowhere", "x"))).code, "collection_not_found");

        // Ids are one path segment each, whatever they hold.
        for (const id of ["a/b", "sp ace", "q?x=1", "50%", "#h", "é"]) {
            const upserted = await api.upsert("board", id, { data: { text: id }, section: "todo" });
            assert.equal(upserted.created, true, id);
            assert.equal((await call(server.url, "GET", `/v1/collections/board/items/${encodeURIComponent(id)}`)).body.data.text, id);
        }
        // Dot segments and empty ids cannot be sent in a URL: `…/items/..` would be the collection's own path.
        for (const id of ["", ".", ".."]) await assert.rejects(api.deleteItem("board", id), TypeError);
        assert.equal((await call(server.url, "GET", "/v1/collections/board")).status, 200);
        const updated = await api.upsert("board", "a/b", { data: 2 }, { ifMatch: "*" });
        assert.equal(updated.created, false);
        assert.deepEqual(updated.changes.items.updated.map((entry) => entry.id), ["a/b"]);
        assert.deepEqual((await api.deleteItem("board", "50%")).changes.items.deleted.map((entry) => entry.id), ["50%"]);

        const view = await api.defineView("cards", { source: "board", sortBy: [{ field: "/text" }] }, { ifNoneMatch: "*" });
        assert.equal(view.created, true);
        assert.equal(await api.deleteView("cards"), undefined);
        assert.equal((await refused(api.deleteView("cards"))).code, "view_not_found");
        assert.equal(await api.deleteCollection("board", { ifMatch: "*" }), undefined);
        assert.equal((await call(server.url, "GET", "/v1/collections/board")).status, 404);

        const gone = writer("http://127.0.0.1:9");
        try {
            await gone.upsert("board", "x");
            assert.fail("a closed port answered");
        } catch (error) {
            assert.ok(error instanceof WriteError && error.status === 0 && error.outcomeUnknown, String(error));
        }
    });

    test("random histories: every changeset, and every coalesced one, takes the old snapshot to the new", async () => {
        const runSeed = seed();
        const steps = Number(process.env.CF_STEPS ?? 300);
        const rng = random(runSeed);
        const counter = { next: 0 };
        const name = `prop-${runSeed}`;
        const context = (step, extra = "") => `seed ${runSeed} (CF_SEED=${runSeed} to replay), step ${step}${extra}`;
        const created = await call(server.url, "PUT", `/v1/collections/${name}`, {
            sections: [{ id: "s0", data: { title: "zero" }, items: [{ id: "a", data: 1 }, { id: "b", data: 2 }] }, { id: "s1", items: [] }],
        });
        assert.equal(created.status, 201);
        const history = [{ version: created.body.version, sections: (await call(server.url, "GET", `/v1/collections/${name}`)).body.sections }];
        let applied = 0;
        let coalesced = 0;
        for (let step = 0; step < steps; step += 1) {
            const current = history.at(-1);
            const mutation = randomMutation(rng, name, current.sections, counter);
            const answer = await call(server.url, mutation.method, mutation.route, mutation.body);
            const snapshot = (await call(server.url, "GET", `/v1/collections/${name}`)).body;
            if (answer.status >= 400) {
                assert.equal(snapshot.version, current.version, context(step, ": a rejected mutation changed the version"));
                continue;
            }
            assert.ok([200, 201].includes(answer.status), context(step, `: ${answer.status}`));
            assert.equal(answer.body.version, snapshot.version, context(step));
            assert.equal(answer.body.changes.from, current.version, context(step));
            assert.equal(answer.body.changes.to, snapshot.version, context(step));
            let next;
            try {
                next = applyChangeset(current.sections, answer.body.changes);
            } catch (error) {
                assert.fail(`${context(step)}: ${error.message}\n${JSON.stringify(mutation)}\n${JSON.stringify(answer.body.changes)}`);
            }
            assert.equal(normalized(next), normalized(snapshot.sections), `${context(step)}: ${JSON.stringify(mutation)}\n${JSON.stringify(answer.body.changes)}`);
            checkMapIndexPath(answer.body.changes, current.sections, snapshot.sections, context(step));
            if (snapshot.version !== current.version) {
                history.push({ version: snapshot.version, sections: snapshot.sections });
                applied += 1;
            }
            // Now and then, the coalesced changeset from a few versions back.
            if (history.length > 2 && rng.chance(0.25)) {
                const back = history[Math.max(0, history.length - 2 - rng.int(Math.min(history.length - 1, 40)))];
                const feed = await call(server.url, "GET", `/v1/collections/${name}/changes?since=${back.version}`);
                assert.equal(feed.status, 200, context(step, ` since ${back.version}`));
                assert.equal(feed.body.from, back.version);
                assert.equal(feed.body.to, snapshot.version);
                const result = applyChangeset(back.sections, feed.body.changes);
                assert.equal(normalized(result), normalized(snapshot.sections), context(step, ` coalesced since ${back.version}`));
                checkMapIndexPath(feed.body.changes, back.sections, snapshot.sections, context(step, ` coalesced since ${back.version}`));
                coalesced += 1;
            }
        }
        assert.ok(applied > steps / 3, `only ${applied} of ${steps} mutations changed something (seed ${runSeed})`);
        console.log(`# seed ${runSeed}: ${applied} changesets and ${coalesced} coalesced ones applied`);
    });

    test("the server answers docs/changesets.md's examples exactly", async () => {
        for (const [k, { title, before, after, changeset }] of examples.entries()) {
            const route = `/v1/collections/docs-example-${k}`;
            assert.equal((await call(server.url, "PUT", route, { sections: before })).status, 201, title);
            const replaced = await call(server.url, "PUT", route, { sections: after });
            assert.equal(replaced.status, 200, title);
            const { sections, items } = replaced.body.changes;
            assert.deepEqual({ sections, items }, { sections: changeset.sections, items: changeset.items }, title);
        }
    });

    test("subscribe sends the bearer token; without it the 401 is reported and retried, not applied", async () => {
        const guarded = await startServer({ args: ["--read-token", "secret-r", "--write-token", "secret-w"] });
        try {
            const sections = [{ id: "s", items: [{ id: "a" }] }];
            await assert.rejects(writer(guarded.url).replace("tok", sections), (error) => error.code === "unauthorized");
            const created = await writer(guarded.url, { token: "secret-w" }).replace("tok", sections);
            assert.equal(created.created, true);
            const errors = [];
            const refused = subscribe(guarded.url, "tok", { onError: (error) => errors.push(error) }, { baseMs: 10, capMs: 20 });
            const withToken = await new Promise((resolve, reject) => {
                const timer = setTimeout(() => reject(new Error("no snapshot with the token")), 5000);
                const subscription = subscribe(guarded.url, "tok", {
                    onSnapshot: ({ sections }) => {
                        clearTimeout(timer);
                        resolve({ subscription, sections });
                    },
                }, { token: "secret-r" });
            });
            assert.equal(withToken.sections[0].items[0].id, "a");
            await withToken.subscription.unsubscribe();
            const deadline = Date.now() + 5000;
            while (errors.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
            await refused.unsubscribe();
            assert.ok(errors.length >= 1, "the 401 was reported");
            assert.ok(errors.every((error) => error.status === 401), errors.map(String).join("; "));
            assert.equal(refused.version, null);
        } finally {
            await guarded.stop();
        }
    });

    test("subscribe follows a collection, starts over on 410, and stops on unsubscribe", async () => {
        const runSeed = seed();
        const rng = random(runSeed + 1);
        const counter = { next: 0 };
        const name = `follow-${runSeed}`;
        await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s", items: [{ id: "a" }] }] });
        const events = [];
        const errors = [];
        let resolveWaiter = null;
        let latest = null;
        const subscription = subscribe(server.url, name, {
            onSnapshot: ({ sections, version }) => {
                latest = { sections, version };
                events.push("snapshot");
                resolveWaiter?.();
            },
            onChangeset: ({ sections, to }) => {
                latest = { sections, version: to };
                events.push("changeset");
                resolveWaiter?.();
            },
            onError: (error) => errors.push(String(error)),
        }, { timeout: 5, baseMs: 50, capMs: 500, missingRetryMs: 100 });
        const waitFor = async (version) => {
            const deadline = Date.now() + 10000;
            while (latest?.version !== version && Date.now() < deadline) {
                await new Promise((resolve) => {
                    resolveWaiter = resolve;
                    setTimeout(resolve, 100);
                });
            }
            const snapshot = (await call(server.url, "GET", `/v1/collections/${name}`)).body;
            assert.equal(latest?.version, version, `seed ${runSeed}: the client did not reach ${version}`);
            assert.equal(normalized(latest.sections), normalized(snapshot.sections), `seed ${runSeed}`);
        };
        for (let step = 0; step < 30; step += 1) {
            const sections = (await call(server.url, "GET", `/v1/collections/${name}`)).body.sections;
            const mutation = randomMutation(rng, name, sections, counter);
            await call(server.url, mutation.method, mutation.route, mutation.body);
            if (rng.chance(0.3)) await waitFor((await call(server.url, "GET", `/v1/collections/${name}`)).body.version);
        }
        await waitFor((await call(server.url, "GET", `/v1/collections/${name}`)).body.version);
        // Delete and make the collection again: a new epoch, the client's cursor is gone.
        assert.equal((await call(server.url, "DELETE", `/v1/collections/${name}`)).status, 204);
        const remade = await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "fresh", items: [{ id: "z" }] }] });
        await waitFor(remade.body.version);
        assert.equal(events.filter((event) => event === "snapshot").length, 2, events.join(" "));
        assert.deepEqual(errors, [], `seed ${runSeed}: errors while following`);
        const started = Date.now();
        await subscription.unsubscribe();
        assert.ok(Date.now() - started < 1000, "unsubscribe ends the held poll at once");
    });
    test("subscribe with kind view follows a view as its source changes, and starts over when it is defined anew", async () => {
        const runSeed = seed();
        const rng = random(runSeed + 2);
        const source = `scores-${runSeed}`;
        const view = `leaders-${runSeed}`;
        const definition = { source, sectionBy: { field: "/team" }, sortBy: [{ field: "/points", order: "desc" }] };
        const player = (k) => ({ id: `p${k}`, data: { team: rng.chance(0.5) ? "red" : "blue", points: rng.int(100) } });
        await call(server.url, "PUT", `/v1/collections/${source}`, { sections: [{ id: "all", items: [0, 1, 2, 3].map(player) }] });
        assert.equal((await call(server.url, "PUT", `/v1/views/${view}`, definition)).status, 201);
        let latest = null;
        let snapshots = 0;
        let changesets = 0;
        const errors = [];
        const subscription = subscribe(server.url, view, {
            onSnapshot: ({ sections, version, kind }) => {
                assert.equal(kind, "view");
                latest = { sections, version };
                snapshots += 1;
            },
            onChangeset: ({ sections, to }) => {
                latest = { sections, version: to };
                changesets += 1;
            },
            onError: (error) => errors.push(String(error)),
        }, { kind: "view", timeout: 5, baseMs: 50, capMs: 500, missingRetryMs: 100 });
        const caughtUp = async () => {
            const snapshot = (await call(server.url, "GET", `/v1/views/${view}`)).body;
            const deadline = Date.now() + 10000;
            while (latest?.version !== snapshot.version && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
            assert.equal(latest?.version, snapshot.version, `seed ${runSeed}: the client did not reach the view's ${snapshot.version}`);
            assert.equal(normalized(latest.sections), normalized(snapshot.sections), `seed ${runSeed}`);
        };
        await caughtUp();
        for (let step = 0; step < 20; step += 1) {
            const changed = player(rng.int(6));
            await call(server.url, "PUT", `/v1/collections/${source}/items/${changed.id}`, { section: "all", data: changed.data });
            if (rng.chance(0.3)) await caughtUp();
        }
        await caughtUp();
        assert.ok(changesets >= 5, `only ${changesets} changesets applied (seed ${runSeed})`);
        // Deleted and defined again: a new epoch, so the client's cursor is gone and it starts from a snapshot.
        assert.equal((await call(server.url, "DELETE", `/v1/views/${view}`)).status, 204);
        assert.equal((await call(server.url, "PUT", `/v1/views/${view}`, { ...definition, sortBy: [{ field: "/points" }] })).status, 201);
        await caughtUp();
        assert.ok(snapshots >= 2, `${snapshots} snapshots`);
        assert.deepEqual(errors, [], `seed ${runSeed}: errors while following`);
        await subscription.unsubscribe();
    });
});
