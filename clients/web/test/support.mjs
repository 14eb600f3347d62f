// Test support: a real ChangeServer on loopback, a seeded random generator and a random history of mutations.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * The ChangeServer binary: $CF_SERVER_BINARY when it is set (WebClientTests passes the one its run built; a
 * wrong one throws rather than falling back to another build), else `.build/debug/ChangeServer` when it exists;
 * null when there is none (the server tests are then skipped, which WebClientTests counts as a failure).
 */
export function serverBinary() {
    const chosen = process.env.CF_SERVER_BINARY;
    if (chosen) {
        if (!existsSync(chosen)) throw new Error(`CF_SERVER_BINARY names no file: ${chosen}`);
        return chosen;
    }
    const built = path.join(repository, ".build/debug/ChangeServer");
    return existsSync(built) ? built : null;
}

/** Starts the server on 127.0.0.1 (port 0: a free one) with a fresh data directory; resolves once it listens. */
export async function startServer({ port = 0, dataDir, args = [] } = {}) {
    const binary = serverBinary();
    if (!binary) throw new Error("no ChangeServer binary: build it or set CF_SERVER_BINARY");
    const ownsDataDir = !dataDir;
    const directory = dataDir ?? mkdtempSync(path.join(tmpdir(), "changefeed-test-"));
    const environment = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("CHANGESERVER_")));
    const child = spawn(
        binary,
        ["--host", "127.0.0.1", "--port", String(port), "--fsync", "never", "--data-dir", directory, ...args],
        { env: environment, stdio: ["ignore", "ignore", "pipe"] }
    );
    let log = "";
    const listening = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the server did not start in 20 s: ${log}`)), 20000);
        child.stderr.on("data", (chunk) => {
            log += chunk;
            const match = /listening on [^ ]+:(\d+)/.exec(log);
            if (match) {
                clearTimeout(timer);
                resolve(Number(match[1]));
            }
        });
        child.on("exit", (code) => {
            clearTimeout(timer);
            reject(new Error(`the server exited (${code}): ${log}`));
        });
    });
    const actualPort = await listening;
    const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
    return {
        port: actualPort,
        url: `http://127.0.0.1:${actualPort}`,
        dataDir: directory,
        get log() {
            return log;
        },
        /** SIGTERM, then SIGKILL after 10 s; removes the data directory unless `keepData`. */
        async stop({ keepData = false } = {}) {
            if (child.exitCode === null && child.signalCode === null) {
                child.kill("SIGTERM");
                const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
                await exited;
                clearTimeout(timer);
            }
            if (ownsDataDir && !keepData) rmSync(directory, { recursive: true, force: true });
        },
    };
}

/**
 * JSON over HTTP: resolves {status, body, headers}; a request that fails or takes over 120 s names itself. The
 * limit is generous: with 2,000 clients in this process and the rest of the suite on the same cores, node's own
 * event loop has been seen to lag 9 s behind (a direct GET answered after 38.7 s in CI).
 */
export async function call(baseURL, method, route, body) {
    const started = Date.now();
    try {
        const response = await fetch(baseURL + route, {
            method,
            headers: body === undefined ? {} : { "Content-Type": "application/json" },
            body: body === undefined ? undefined : JSON.stringify(body),
            signal: AbortSignal.timeout(120000),
        });
        const text = await response.text();
        return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
    } catch (error) {
        throw new Error(`${method} ${baseURL}${route} after ${Date.now() - started} ms: ${failure(error)}`, { cause: error });
    }
}

/**
 * `fetch` whose network failures name the request, how long it was out and their cause. Node's says only `fetch
 * failed`, its cause (`ECONNREFUSED`, `ECONNRESET`) in a property a test's unhandled rejection does not print: all
 * a CI failure through nginx once said. An abort or a timeout is passed on as it came.
 */
export async function namedFetch(target, init = {}) {
    const started = Date.now();
    try {
        return await fetch(target, init);
    } catch (error) {
        if (error?.name === "AbortError" || error?.name === "TimeoutError") throw error;
        throw new TypeError(`${init.method ?? "GET"} ${target} after ${Date.now() - started} ms: ${failure(error)}`, { cause: error });
    }
}

/** An error's message with its cause's code (or message), where it has one. */
function failure(error) {
    const cause = error?.cause?.code ?? error?.cause?.message;
    return cause ? `${error.message} (${cause})` : `${error.message}`;
}

/** mulberry32: a small seeded generator, so that a failing history can be replayed from its seed. */
export function random(seed) {
    let state = seed >>> 0;
    const next = () => {
        state = (state + 0x6d2b79f5) >>> 0;
        let t = state;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const int = (bound) => Math.floor(next() * bound);
    return { next, int, pick: (list) => list[int(list.length)], chance: (p) => next() < p };
}

/** Canonical JSON: object keys sorted, no whitespace; two data values are equal when theirs are. */
export function canonical(value) {
    if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
    if (value && typeof value === "object") {
        return `{${Object.keys(value)
            .sort()
            .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
            .join(",")}}`;
    }
    return JSON.stringify(value ?? null);
}

export const normalized = (sections) =>
    canonical(sections.map((s) => ({ id: s.id, data: s.data ?? null, items: s.items.map((i) => ({ id: i.id, data: i.data ?? null })) })));

/**
 * One random mutation of `sections` (the current snapshot): a request {method, route, body} for the REST API.
 * Mostly valid ops that move, insert, delete and update items and sections, across sections too; some
 * multi-op batches, whole-content replacements and item upserts.
 */
export function randomMutation(rng, name, sections, counter) {
    const fresh = (prefix) => `${prefix}${counter.next++}`;
    const data = () => rng.pick([{ text: fresh("t") }, rng.int(100), null, { text: fresh("t"), n: rng.int(5) }, fresh("s")]);
    const allItems = sections.flatMap((section, s) => section.items.map((item, i) => ({ item, s, i })));
    const sectionRef = (s) => (rng.chance(0.5) ? s : sections[s].id);
    const ops = [];
    const kind = rng.int(20);
    if (sections.length === 0 || kind === 0) {
        return { method: "PUT", route: `/v1/collections/${name}`, body: { sections: randomContent(rng, fresh, data) } };
    }
    if (kind === 1) {
        // Replace: shuffle some items across sections, drop some, add some, edit some.
        const next = sections.map((section) => ({ id: section.id, data: section.data, items: [] }));
        for (const { item } of allItems) {
            if (rng.chance(0.15)) continue;
            next[rng.int(next.length)].items.push({ id: item.id, data: rng.chance(0.2) ? data() : item.data });
        }
        for (const section of next) if (rng.chance(0.3)) section.items.splice(rng.int(section.items.length + 1), 0, { id: fresh("n"), data: data() });
        for (let k = 0; k < next.length; k += 1) {
            const j = rng.int(next.length);
            if (rng.chance(0.3)) [next[k], next[j]] = [next[j], next[k]];
        }
        if (rng.chance(0.3)) next.splice(rng.int(next.length + 1), 0, { id: fresh("S"), data: data(), items: [] });
        if (next.length > 1 && rng.chance(0.2)) next.splice(rng.int(next.length), 1);
        return { method: "PUT", route: `/v1/collections/${name}`, body: { sections: next } };
    }
    if (kind === 2 && allItems.length) {
        const { item } = rng.pick(allItems);
        if (rng.chance(0.5)) return { method: "DELETE", route: `/v1/collections/${name}/items/${item.id}` };
        const body = { data: data() };
        if (rng.chance(0.5)) body.section = sectionRef(rng.int(sections.length));
        return { method: "PUT", route: `/v1/collections/${name}/items/${item.id}`, body };
    }
    if (kind === 3) {
        return {
            method: "PUT",
            route: `/v1/collections/${name}/items/${fresh("u")}`,
            body: { data: data(), section: sectionRef(rng.int(sections.length)) },
        };
    }
    // A batch of 1 to 3 ops; later ones may no longer fit (then the whole batch is a 409 and nothing changes).
    const count = 1 + (rng.chance(0.3) ? rng.int(3) : 0);
    for (let k = 0; k < count; k += 1) {
        const s = rng.int(sections.length);
        const section = sections[s];
        switch (rng.int(9)) {
            case 0:
                ops.push({ op: "insertItems", at: [sectionRef(s), rng.int(section.items.length + 1)], items: Array.from({ length: 1 + rng.int(3) }, () => ({ id: fresh("i"), data: data() })) });
                break;
            case 1:
                if (allItems.length) ops.push({ op: "deleteItems", items: [rng.pick(allItems).item.id, ...(rng.chance(0.3) ? [[sectionRef(s), 0]] : [])] });
                break;
            case 2:
            case 3: {
                if (!allItems.length) break;
                const target = sections[rng.int(sections.length)];
                ops.push({ op: "moveItem", item: rng.pick(allItems).item.id, to: [sectionRef(sections.indexOf(target)), rng.int(target.items.length)] });
                break;
            }
            case 4:
                if (allItems.length) ops.push({ op: "updateItems", items: [{ id: rng.pick(allItems).item.id, data: data() }] });
                break;
            case 5:
                ops.push({ op: "insertSections", at: rng.int(sections.length + 1), sections: [{ id: fresh("S"), data: data(), items: rng.chance(0.5) ? [{ id: fresh("i"), data: data() }] : [] }] });
                break;
            case 6:
                if (sections.length > 1) ops.push({ op: "deleteSections", sections: [sectionRef(s)] });
                break;
            case 7:
                ops.push({ op: "moveSection", section: sectionRef(s), to: rng.int(sections.length) });
                break;
            default:
                ops.push({ op: "updateSection", section: sectionRef(s), data: data() });
        }
    }
    if (!ops.length) ops.push({ op: "updateSection", section: 0, data: data() });
    return { method: "POST", route: `/v1/collections/${name}/mutations`, body: { ops } };
}

export function randomContent(rng, fresh, data) {
    return Array.from({ length: 1 + rng.int(4) }, () => ({
        id: fresh("S"),
        data: { title: fresh("title ") },
        items: Array.from({ length: rng.int(6) }, () => ({ id: fresh("i"), data: data() })),
    }));
}

/** The seed of this run: $CF_SEED, or a fresh one (printed by the tests on failure). */
export function seed() {
    return process.env.CF_SEED ? Number(process.env.CF_SEED) : Math.floor(Math.random() * 2 ** 31);
}
