// node --test clients/web/test/cache.test.mjs: the feed through the shipped caches (README, "The feed through
// HTTP caches"): thousands of web clients (changefeed.js's subscribe) behind one cache in front of one server.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { subscribe } from "../changefeed.js";
import { freePort, hasProgram, originFeedRequests, startNginx, startVarnish } from "./front.mjs";
// Every `fetch` here is `namedFetch`: a request that fails names itself and its cause.
import { call, namedFetch as fetch, normalized, random, randomMutation, seed, serverBinary, startServer } from "./support.mjs";

const binary = serverBinary();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `done()` holds, checking every 20 ms, at most `seconds`. */
async function until(done, seconds, what) {
    const deadline = Date.now() + seconds * 1000;
    while (!done()) {
        if (Date.now() > deadline) assert.fail(`not within ${seconds} s: ${what}`);
        await sleep(20);
    }
}

/**
 * `count` web clients following `name` through `url`, each recording what it applied and when it asked; an error
 * is recorded with the request it ended (its URL and how long it was out).
 *
 * They wait 120 s past a poll's hold before giving a silent connection up (30 s by default, which has its own test
 * in changefeed.test.mjs): CI once ran the whole suite at a third of this machine's speed, and one of the 2,000
 * clients through nginx gave a request up after the default. What is tested here is collapsing and order.
 */
function subscribers(url, name, count, timeout) {
    return Array.from({ length: count }, () => {
        const client = { versions: [], snapshots: 0, errors: [], requests: [] };
        const recordingFetch = async (target, init) => {
            const request = { at: Date.now(), target, answeredAt: null };
            client.requests.push(request);
            const response = await fetch(target, init);
            request.answeredAt = Date.now();
            return response;
        };
        client.subscription = subscribe(url, name, {
            onSnapshot: () => (client.snapshots += 1),
            onChangeset: ({ from, to }) => client.versions.push([from, to]),
            onError: (error) => {
                const last = client.requests.at(-1);
                const out = last && last.answeredAt === null ? `, ${last.target} out for ${Date.now() - last.at} ms` : "";
                client.errors.push(`${error}${out}`);
            },
        }, { timeout, fetch: recordingFetch, baseMs: 100, capMs: 1000, silenceSeconds: 120 });
        return client;
    });
}

const skip = (program) =>
    !binary ? "no ChangeServer binary (set CF_SERVER_BINARY)" : !hasProgram(program) ? `no ${program} (scripts/install-deps.sh)` : false;
const missing = skip("nginx");

/**
 * `count` subscribers through a cache (`startFront`) whose collapsing is shared by `workers` processes: each
 * applies every change in order and ends equal to the snapshot; the origin sees at most 2 feed requests per
 * mutation per worker, and with no mutation for 3 poll timeouts at most 2 per timeout per worker, every collapsed
 * poll held its whole timeout, and no client polling more than twice per timeout.
 *
 * A cache hands a pending poll's answer to every client that joined it, also to one that joined late (here: one
 * whose last answer this process read late, reading thousands of them on a shared core), which is then answered
 * early and polls again at once (changefeed.js, quickEmptyWait), joining the poll the cache holds for the others:
 * the early answers are counted and printed, and what is asserted is that the first request of every URL was held
 * and that no client polled more than twice per timeout.
 */
const collapsing = (title, program, startFront, count, workers) => describe(title, { skip: skip(program) }, () => {
    let server;
    let front;
    before(async () => {
        server = await startServer({ args: ["--history", "100"] });
        front = await startFront(server.port);
    });
    after(async () => {
        if (process.env.CF_KEEP_FRONT) console.log(front.directory);
        else await front?.stop();
        await server?.stop();
    });

    test(`${count} subscribers, 50 mutations, then 3 idle timeouts`, { timeout: 600000 }, async () => {
        const runSeed = seed();
        const rng = random(runSeed);
        const counter = { next: 0 };
        const name = `cached-${runSeed}`;
        const timeout = 10;
        await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s", items: [{ id: "a" }] }] });
        const clients = subscribers(front.url, name, Number(process.env.CF_CACHE_CLIENTS ?? count), timeout);
        try {
            let version = (await call(server.url, "GET", `/v1/collections/${name}`)).body.version;
            await until(() => clients.every((client) => client.subscription.version === version), 120, "every snapshot");

            // 50 mutations, one every 200 ms: clients behind get coalesced changesets, never one out of order.
            const before = await originFeedRequests(server.url);
            let mutations = 0;
            for (let step = 0; step < 50; step += 1) {
                const sections = (await call(server.url, "GET", `/v1/collections/${name}`)).body.sections;
                const mutation = randomMutation(rng, name, sections, counter);
                const answer = await call(server.url, mutation.method, mutation.route, mutation.body);
                if (answer.status < 300 && answer.body?.version !== version) mutations += 1;
                version = (await call(server.url, "GET", `/v1/collections/${name}`)).body.version;
                await sleep(200);
            }
            await until(() => clients.every((client) => client.subscription.version === version), 60, "every client at the last version");
            const perMutation = ((await originFeedRequests(server.url)) - before) / mutations;
            assert.ok(mutations >= 30, `seed ${runSeed}: only ${mutations} mutations changed something`);
            assert.ok(perMutation <= 2 * workers, `seed ${runSeed}: ${perMutation} origin feed requests per mutation`);

            const snapshot = normalized((await call(server.url, "GET", `/v1/collections/${name}`)).body.sections);
            const errors = clients.flatMap((client) => client.errors);
            if (errors.length > 0) {
                await sleep(1500); // nginx flushes its access log every second
                assert.deepEqual(errors, [], `the slowest requests through the cache:\n${(front.slowestRequests?.(5) ?? []).join("\n")}`);
            }
            for (const client of clients) {
                let at = client.versions[0]?.[0];
                for (const [from, to] of client.versions) {
                    assert.equal(from, at, `seed ${runSeed}: a changeset that does not start where the last ended`);
                    at = to;
                }
                assert.equal(at, version);
                assert.equal(normalized(client.subscription.sections), snapshot, `seed ${runSeed}`);
                assert.equal(client.snapshots, 1);
            }

            // Idle for 3 poll timeouts: the polls are collapsed, and each client waits its timeout every time.
            const idleStart = Date.now();
            const idleBefore = await originFeedRequests(server.url);
            await sleep(3 * timeout * 1000);
            const idleRequests = (await originFeedRequests(server.url)) - idleBefore;
            assert.ok(idleRequests <= 2 * 3 * workers, `${idleRequests} origin feed requests in 3 idle timeouts`);
            let mostRequests = 0;
            let answered = 0;
            let early = 0;
            let earliest = Infinity;
            const firstAsked = new Map();
            const firstAnswered = new Map();
            for (const client of clients) {
                mostRequests = Math.max(mostRequests, client.requests.filter((request) => request.at >= idleStart).length);
                for (const request of client.requests) {
                    firstAsked.set(request.target, Math.min(firstAsked.get(request.target) ?? Infinity, request.at));
                    if (request.answeredAt === null) continue;
                    firstAnswered.set(request.target, Math.min(firstAnswered.get(request.target) ?? Infinity, request.answeredAt));
                    if (request.at < idleStart) continue;
                    const held = request.answeredAt - request.at;
                    answered += 1;
                    if (held < timeout * 1000 - 100) early += 1;
                    earliest = Math.min(earliest, held);
                }
            }
            const slowest = Math.max(...clients.flatMap((client) => client.requests.map((request) => (request.answeredAt ?? Date.now()) - request.at)));
            const held = [...firstAsked].filter(([target, at]) => at >= idleStart && firstAnswered.has(target)).map(([target, at]) => firstAnswered.get(target) - at);
            console.log(
                `${title}: ${perMutation.toFixed(2)} origin requests per mutation, ${idleRequests} idle in ${3 * timeout} s, ` +
                    `${held.length} idle poll URLs held ${Math.min(...held)}–${Math.max(...held)} ms, ` +
                    `${early} of ${answered} idle answers early (the earliest after ${earliest} ms), ` +
                    `at most ${mostRequests} polls by one client, the slowest request ${slowest} ms`,
            );
            assert.ok(held.length >= 1, `no poll URL was asked and answered in ${3 * timeout} idle seconds`);
            for (const time of held) assert.ok(time >= 0.95 * timeout * 1000, `a poll URL first asked was answered after ${time} ms`);
            // Twice per timeout, and one more begun in the last.
            assert.ok(mostRequests <= 2 * 3 + 1, `a client polled ${mostRequests} times in ${3 * timeout} idle seconds`);
        } finally {
            await Promise.all(clients.map((client) => client.subscription.unsubscribe()));
        }
    });
});

collapsing("through nginx (deploy/nginx/changeserver.conf)", "nginx", startNginx, 2000, availableParallelism());
// Varnish's waiting list is one per object, whatever its threads.
collapsing("through Varnish (deploy/varnish/changeserver.vcl)", "varnishd", startVarnish, 500, 1);

/** A text/event-stream read with node's http client: resolves once the headers arrived; `events` fills up. */
function openStream(url, headers = {}) {
    return new Promise((resolve, reject) => {
        const request = http.get(url, { headers: { Accept: "text/event-stream", ...headers } }, (response) => {
            const stream = { status: response.status ?? response.statusCode, headers: response.headers, events: [], comments: 0, ended: false, request };
            let pending = "";
            response.setEncoding("utf8");
            response.on("data", (text) => {
                pending += text;
                let blank;
                while ((blank = pending.indexOf("\n\n")) >= 0) {
                    const block = pending.slice(0, blank);
                    pending = pending.slice(blank + 2);
                    const fields = {};
                    for (const line of block.split("\n")) {
                        if (line.startsWith(":")) continue;
                        const colon = line.indexOf(":");
                        fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, "");
                    }
                    if (fields.data === undefined) stream.comments += 1;
                    else stream.events.push({ name: fields.event, id: fields.id, body: JSON.parse(fields.data) });
                }
            });
            response.on("end", () => (stream.ended = true));
            response.on("error", () => {});
            resolve(stream);
        });
        request.on("error", reject);
    });
}

/**
 * Runs `body` with a server holding collection `c` behind the shipped Varnish, and stops both after it:
 * `feed(timeout)` is a poll's URL through the front from the collection's version, `stop()` stops the server, and
 * `restart()` starts it again on its port and data directory and returns it.
 */
async function behindVarnish(body) {
    const dataDir = mkdtempSync(path.join(tmpdir(), "changefeed-varnish-"));
    let server = await startServer({ dataDir });
    const port = server.port;
    const front = await startVarnish(port);
    try {
        const version = (await call(server.url, "PUT", "/v1/collections/c", { sections: [{ id: "s" }] })).body.version;
        await body({
            feed: (timeout) => `${front.url}/v1/collections/c/changes?since=${version}&timeout=${timeout}`,
            port,
            stop: () => server.stop(),
            restart: async () => (server = await startServer({ dataDir, port })),
        });
    } finally {
        await front.stop();
        await server.stop();
        rmSync(dataDir, { recursive: true, force: true });
    }
}

describe("Varnish after an answer it must not store", { skip: skip("varnishd") }, () => {
    // Varnish's built-in rules once made such an answer a hit-for-miss object for 120 s, during which identical
    // polls of its URL no longer waited for one another: after a restart, every client's retry reached the server.
    test("a poll answered 503 at shutdown: identical polls of its URL collapse again at once", { timeout: 60000 }, async () => {
        await behindVarnish(async ({ feed, stop, restart }) => {
            const url = feed(3);
            const held = fetch(url);
            await sleep(300);
            await stop();
            const answer = await held;
            assert.equal(answer.status, 503);
            assert.equal(answer.headers.get("cache-control"), "no-store");
            const server = await restart();
            await sleep(1200); // the 503's hit-for-miss object lasts 1 s (120 s by Varnish's built-in rules)
            const before = await originFeedRequests(server.url);
            const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(url)));
            assert.deepEqual(new Set(answers.map((each) => each.status)), new Set([200]));
            const reached = (await originFeedRequests(server.url)) - before;
            assert.ok(reached <= 2, `${reached} of 20 identical polls reached the server`);
        });
    });

    // With polls waiting, Varnish keeps its own error for them; with its default grace a feed URL went on answering
    // that 502 for 5 s after the server was back (a helper's find), so clients backed off on a server that answered.
    test("its own 502 for a feed URL lasts about a second once the server is back", { timeout: 60000 }, async () => {
        await behindVarnish(async ({ feed, port, stop, restart }) => {
            const url = feed(1);
            await stop();
            // A refused connect fails at once, often before the other polls queue behind it: the port's listener
            // takes the fetch's connection and drops it after 300 ms, so that all ten wait on one fetch and get
            // the error object Varnish keeps for them.
            let connections = 0;
            const dropper = net.createServer((socket) => {
                connections += 1;
                setTimeout(() => socket.destroy(), 300);
            });
            await new Promise((resolve) => dropper.listen(port, "127.0.0.1", resolve));
            const down = await Promise.all(Array.from({ length: 10 }, () => fetch(url)));
            await new Promise((resolve) => dropper.close(resolve));
            assert.deepEqual(new Set(down.map((each) => each.status)), new Set([502]));
            assert.ok(connections <= 2, `${connections} fetches for 10 identical polls: they did not wait for one`);
            await restart();
            await sleep(1500); // the 502 object lives 1 s; with Varnish's grace it was served 5 s
            const answer = await fetch(url);
            assert.equal(answer.status, 200, "the front still answers its own 502 while the server is back");
        });
    });
});

/** A front's own errors, with no server behind it: the API's JSON error form, not the front's HTML page. */
const ownErrors = (title, program, startFront, paths) => describe(title, { skip: skip(program) }, () => {
    test("a request that reaches no server gets 502 bad_gateway as JSON", { timeout: 60000 }, async () => {
        const front = await startFront(await freePort());
        try {
            const write = ["/v1/collections/c/items/a", {}, { method: "PUT", body: '{"data": 1}' }];
            for (const [target, headers, init] of [...paths, write]) {
                const answer = await fetch(`${front.url}${target}`, { headers, ...init });
                const what = `${init?.method ?? "GET"} ${target} ${JSON.stringify(headers)}`;
                assert.equal(answer.status, 502, what);
                assert.match(answer.headers.get("content-type") ?? "", /^application\/json/, what);
                // A read may be sent again in a second; a write is to be read first.
                assert.equal(answer.headers.get("retry-after"), init === undefined ? "1" : null, what);
                const error = (await answer.json()).error;
                assert.equal(error.code, "bad_gateway", what);
                // A read is only told to retry; a write that it may have been applied.
                assert.equal(error.message.includes("A write's outcome is unknown"), init !== undefined, what);
            }
        } finally {
            await front.stop();
        }
    });
});

const poll = ["/v1/collections/c/changes?timeout=1", {}];
ownErrors("nginx's own errors (deploy/nginx/changeserver.conf)", "nginx", startNginx, [
    ["/v1/collections/c", {}], poll, ["/v1/collections/c/changes", { accept: "text/event-stream" }],
]);
ownErrors("Varnish's own errors (deploy/varnish/changeserver.vcl)", "varnishd", startVarnish, [["/v1/collections/c", {}], poll]);

describe("streams through nginx (deploy/nginx/changeserver.conf)", { skip: missing }, () => {
    let server;
    let front;
    before(async () => {
        server = await startServer();
        front = await startNginx(server.port);
    });
    after(async () => {
        await front?.stop();
        await server?.stop();
    });

    test("events arrive unbuffered and in order, resume with Last-Event-ID, and end with gone", { timeout: 60000 }, async () => {
        const name = `streamed-${seed()}`;
        const first = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s" }] })).body.version;
        const stream = await openStream(`${front.url}/v1/collections/${name}/changes?since=${first}`);
        assert.equal(stream.status, 200);
        assert.equal(stream.headers["content-type"], "text/event-stream; charset=utf-8");
        assert.equal(stream.headers["x-cache-status"], undefined, "a stream never goes through the cache");
        let version = first;
        for (let index = 0; index < 20; index += 1) {
            const answer = await call(server.url, "PUT", `/v1/collections/${name}/items/i${index}`, { data: index });
            version = answer.body.version;
            // Unbuffered: each event is through nginx long before the next mutation.
            await until(() => stream.events.at(-1)?.id === version, 5, `event ${index} through nginx`);
        }
        let at = first;
        for (const event of stream.events) {
            assert.equal(event.name, "changes");
            assert.equal(event.body.from, at);
            at = event.id;
        }
        stream.request.destroy();
        const lastSeen = at;
        await call(server.url, "PUT", `/v1/collections/${name}/items/late`, { data: 1 });
        const resumed = await openStream(`${front.url}/v1/collections/${name}/changes`, { "Last-Event-ID": lastSeen });
        await until(() => resumed.events.length === 1, 5, "the catch-up event");
        assert.equal(resumed.events[0].body.from, lastSeen);
        assert.equal((await call(server.url, "DELETE", `/v1/collections/${name}`)).status, 204);
        await until(() => resumed.ended, 5, "the end of the stream");
        assert.equal(resumed.events.at(-1).name, "gone");
        assert.equal(resumed.events.at(-1).body.error.code, "collection_deleted");
    });

    // A feed 404 is stored 2 s, so that it replaces the URL's last answer: answered `no-store`, it left that entry
    // in place, and nginx (proxy_cache_use_stale updating) handed the deleted collection's reset, snapshot and all,
    // to every poll that came while another refreshed it, for as long as polls came.
    test("a deleted collection's last answer is not served once a poll has found it gone", { timeout: 60000 }, async () => {
        const name = `deleted-${seed()}`;
        await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s", items: [{ id: "secret" }] }] });
        const url = `${front.url}/v1/collections/${name}/changes?timeout=25`;
        assert.equal((await fetch(url)).status, 200);
        await sleep(2500); // the reset's 2 s run out
        assert.equal((await call(server.url, "DELETE", `/v1/collections/${name}`)).status, 204);
        const rounds = [];
        for (let round = 0; round < 3; round += 1) {
            const answers = await Promise.all(Array.from({ length: 50 }, () => fetch(url).then(async (answer) => ({ status: answer.status, body: await answer.text() }))));
            rounds.push(answers);
            await sleep(1000);
        }
        const last = rounds.at(-1);
        assert.deepEqual(new Set(last.map((answer) => answer.status)), new Set([404]), `statuses by round: ${rounds.map((answers) => answers.map((answer) => answer.status).join(",")).join(" | ")}`);
        assert.ok(last.every((answer) => !answer.body.includes("secret")));
    });

    // Resets are kept in a cache of their own that drops an entry no request asked for in 2 s: kept with the other
    // polls, an idle URL's reset was handed out, however old, to the requests that came while one refreshed it (a
    // version past the kept history, a deleted collection's snapshot: 29 of 30 here). A burst after that finds no
    // entry and still reaches the server once, behind the lock.
    test("an idle URL's old reset is not handed out, and a burst of resets still collapses", { timeout: 60000 }, async () => {
        const name = `reset-${seed()}`;
        const items = Array.from({ length: 20000 }, (_, index) => ({ id: `i${index}`, data: "x".repeat(100) }));
        const first = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s", items }] })).body.version;
        const url = `${front.url}/v1/collections/${name}/changes?timeout=25`;
        assert.equal((await (await fetch(url)).json()).to, first);
        await sleep(14000); // 2 s without a request, and up to 10 s until nginx's cache manager looks
        const second = (await call(server.url, "PUT", `/v1/collections/${name}/items/late`, { data: 1 })).body.version;
        const before = await originFeedRequests(server.url);
        const answers = await Promise.all(Array.from({ length: 30 }, () => fetch(url).then(async (answer) => ({
            status: answer.status, cache: answer.headers.get("x-cache-status"), to: (await answer.json()).to,
        }))));
        const old = answers.filter((answer) => answer.to !== second);
        assert.deepEqual(old, [], `${old.length} of 30 resets were not at ${second}`);
        const reached = (await originFeedRequests(server.url)) - before;
        assert.ok(reached <= 2, `${reached} of 30 resets reached the server`);
    });
});

/** What one client's request must not do to the others' polls through a cache, for each shipped front. */
const isolation = (title, program, startFront) => describe(title, { skip: skip(program) }, () => {
    let server;
    let front;
    before(async () => {
        server = await startServer({ args: ["--cors-origin", "https://good.example"] });
        front = await startFront(server.port);
    });
    after(async () => {
        await front?.stop();
        await server?.stop();
    });

    // The server answers a version ahead of the current one 410; stored, that answer waited in the cache at the
    // URL every client polls next, and one anonymous request per mutation made the clients reset in a loop.
    test("a 410 asked for the next version is not handed to the clients that poll it", { timeout: 60000 }, async () => {
        const name = `ahead-${seed()}`;
        const head = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s" }] })).body.version;
        const [epoch, seq] = [head.slice(0, head.lastIndexOf(".")), Number(head.slice(head.lastIndexOf(".") + 1))];
        const next = `${front.url}/v1/collections/${name}/changes?since=${epoch}.${seq + 1}&timeout=2`;
        const planted = await fetch(next);
        assert.equal(planted.status, 410);
        assert.equal(planted.headers.get("cache-control"), "no-store");
        const before = await originFeedRequests(server.url);
        assert.equal((await call(server.url, "PUT", `/v1/collections/${name}/items/a`, { data: 1 })).status, 201);
        const answers = await Promise.all(Array.from({ length: 10 }, () => fetch(next)));
        assert.deepEqual(answers.map((answer) => answer.status), Array(10).fill(200));
        // Nor does it keep them from waiting for one another (as Varnish's hit-for-miss object of it did).
        const reached = (await originFeedRequests(server.url)) - before;
        assert.ok(reached <= 2, `${reached} of 10 identical polls reached the server`);
    });

    // With origins named in --cors-origin an answer carries the asking origin's headers, so the cache keeps each
    // origin's apart; a key made of the URL and the Origin end to end let a URL and an Origin of one's choosing
    // (`…timeout=1` from `3https://good.example`) make a page's key (`…timeout=13` from `https://good.example`),
    // and the page got an answer without its Access-Control-Allow-Origin: "Failed to fetch".
    test("each origin gets its own answer, and no URL and Origin make another's key", { timeout: 60000 }, async () => {
        const name = `origin-${seed()}`;
        const head = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s" }] })).body.version;
        const base = `${front.url}/v1/collections/${name}/changes?since=${head}`;
        const planted = await fetch(`${base}&timeout=1`, { headers: { Origin: "3https://good.example" } });
        assert.equal(planted.status, 200);
        assert.equal(planted.headers.get("access-control-allow-origin"), null);
        const page = fetch(`${base}&timeout=13`, { headers: { Origin: "https://good.example" } });
        const app = fetch(`${base}&timeout=13`);
        await sleep(300);
        assert.equal((await call(server.url, "PUT", `/v1/collections/${name}/items/a`, { data: 1 })).status, 201);
        const [forPage, forApp] = await Promise.all([page, app]);
        assert.equal(forPage.headers.get("access-control-allow-origin"), "https://good.example");
        assert.equal(forApp.headers.get("access-control-allow-origin"), null);
        for (const answer of [forPage, forApp]) {
            const body = await answer.json();
            assert.equal(body.from, head);
            assert.equal(body.changes.items.inserted.length, 1, JSON.stringify(body));
        }
    });

    // The server's `Vary: Accept` (a stream and a poll share a URL) made a cache keep one answer per Accept value:
    // polls that differed in it alone were not collapsed, and a client whose Accept differed from the first
    // one's waited for the other's answer, then held its own: twice the poll's timeout.
    test("polls that differ only in Accept collapse into one and are answered at the hold", { timeout: 60000 }, async () => {
        const name = `accept-${seed()}`;
        const head = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s" }] })).body.version;
        const url = `${front.url}/v1/collections/${name}/changes?since=${head}&timeout=3`;
        const before = await originFeedRequests(server.url);
        const started = Date.now();
        const first = fetch(url, { headers: { Accept: "*/*" } });
        await sleep(200);
        const accepts = ["application/json", "application/json, text/plain, */*", "text/html,*/*;q=0.8", "*/*"];
        const others = Array.from({ length: 12 }, (_, index) => fetch(url, { headers: { Accept: accepts[index % accepts.length] } }));
        const answers = await Promise.all([first, ...others]);
        const elapsed = Date.now() - started;
        assert.deepEqual(new Set(answers.map((answer) => answer.status)), new Set([200]));
        for (const answer of answers) assert.equal((await answer.json()).from, head);
        assert.ok(elapsed < 5500, `answered after ${elapsed} ms, where the hold is 3 s`);
        const reached = (await originFeedRequests(server.url)) - before;
        assert.ok(reached <= 2, `${reached} polls reached the server`);
    });
});

isolation("one client's requests through nginx (deploy/nginx/changeserver.conf)", "nginx", startNginx);
isolation("one client's requests through Varnish (deploy/varnish/changeserver.vcl)", "varnishd", startVarnish);

// With `--cors-origin '*'` (or none) every origin gets the same answer: `--any-origin` keeps the Origin out of
// nginx's key, so the polls of several origins collapse together (the key with the Origin split them: 11 origin
// requests for 11 origins, found in review).
describe("nginx --any-origin in front of a server with --cors-origin '*'", { skip: missing }, () => {
    test("polls from several origins are one request, each answered with the same CORS headers", { timeout: 60000 }, async () => {
        const server = await startServer({ args: ["--cors-origin", "*"] });
        const front = await startNginx(server.port, ["--any-origin"]);
        try {
            const name = `origins-${seed()}`;
            const head = (await call(server.url, "PUT", `/v1/collections/${name}`, { sections: [{ id: "s" }] })).body.version;
            const url = `${front.url}/v1/collections/${name}/changes?since=${head}&timeout=20`;
            const before = await originFeedRequests(server.url);
            const origins = ["https://a.example", "https://b.example", "https://c.example", null];
            const polls = Array.from({ length: 12 }, (_, index) => {
                const origin = origins[index % origins.length];
                return fetch(url, { headers: origin ? { Origin: origin } : {} });
            });
            await sleep(500);
            assert.equal((await call(server.url, "PUT", `/v1/collections/${name}/items/a`, { data: 1 })).status, 201);
            const answers = await Promise.all(polls);
            for (const answer of answers) {
                assert.equal(answer.status, 200);
                assert.equal(answer.headers.get("access-control-allow-origin"), "*");
                assert.equal((await answer.json()).from, head);
            }
            const reached = (await originFeedRequests(server.url)) - before;
            assert.ok(reached <= 2, `${reached} polls from four origins reached the server`);
        } finally {
            await front.stop();
            await server.stop();
        }
    });
});

// nginx-front.sh ran `nginx -t` before nginx, and `nginx -t` listens on the port while it checks: a client that
// took the port's first connection for the front being up had its next requests refused or reset (a CI failure;
// 20 of 30 starts here once the port is watched every millisecond).
const ready = (title, program, startFront) => describe(title, { skip: skip(program) }, () => {
    test("every start serves the first request after its port takes a connection", { timeout: 120000 }, async () => {
        const server = await startServer();
        try {
            for (let start = 0; start < 10; start++) {
                const front = await startFront(server.port);
                try {
                    const answer = await fetch(`${front.url}/healthz`).catch((error) => error);
                    assert.equal(answer.status, 200, `start ${start + 1}: ${answer}`);
                } finally {
                    await front.stop();
                }
            }
        } finally {
            await server.stop();
        }
    });
});

ready("a started nginx (scripts/nginx-front.sh)", "nginx", startNginx);
ready("a started Varnish (scripts/varnish-front.sh)", "varnishd", startVarnish);
