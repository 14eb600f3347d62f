// changefeed.js: a dependency-free ES module for ChangeServer's change feed (API.md).
//
//   import { subscribe, applyChangeset, mapIndexPath, renderList } from "/v1/client/changefeed.js";
//
// - subscribe(baseURL, name, handlers, options) follows a collection (with {kind: "view"}, a view) by the client
//   loop: snapshot, long-poll with the server's `next` (with {transport: "sse"}, one Server-Sent Events stream,
//   falling back to long-poll), apply, poll again; 410 starts over; network errors, 429 and 5xx back off (full
//   jitter, capped, Retry-After).
// - applyChangeset(sections, changeset) is a pure function with UIKit's batch semantics.
// - mapIndexPath(changeset, [s, i]) tells where the item that was at [s, i] went (or null).
// - renderList(container, options) renders sections into the DOM keyed by id, animates every changeset and
//   keeps the first visible row in place when content above it changes.
// - writer(baseURL, options) writes: replace, mutate, upsert, deleteItem, deleteCollection, defineView, deleteView.

/** An inconsistent changeset, or one that does not fit the sections it is applied to. */
export class ChangesetError extends Error {
    constructor(message) {
        super(message);
        this.name = "ChangesetError";
    }
}

/** An HTTP answer the client loop does not retry by itself (400, 401, 403, ...). */
export class FeedError extends Error {
    constructor(status, body, message) {
        super(message ?? `HTTP ${status}: ${body?.error?.message ?? "unexpected answer"}`);
        this.name = "FeedError";
        this.status = status;
        this.code = body?.error?.code;
        this.body = body;
    }
}

function fail(message) {
    throw new ChangesetError(message);
}

function isIndex(value, count) {
    return Number.isInteger(value) && value >= 0 && value < count;
}

/**
 * Fills `slots` (an array of length n, some entries set) with `rest` in order, in the unset places.
 * Throws unless `rest` has exactly as many elements as there are holes.
 */
function fillHoles(slots, rest, what) {
    let next = 0;
    for (let index = 0; index < slots.length; index += 1) {
        if (slots[index] !== undefined) continue;
        if (next >= rest.length) fail(`${what}: the batch leaves a hole at index ${index}`);
        slots[index] = rest[next];
        next += 1;
    }
    if (next !== rest.length) fail(`${what}: ${rest.length - next} elements have no place after the batch`);
    return slots;
}

function place(slots, index, value, what) {
    if (!isIndex(index, slots.length)) fail(`${what}: index ${index} is out of range 0..<${slots.length}`);
    if (slots[index] !== undefined) fail(`${what}: index ${index} is the destination of two changes`);
    slots[index] = value;
}

function checkPath(path, what) {
    if (!Array.isArray(path) || path.length !== 2 || !Number.isInteger(path[0]) || !Number.isInteger(path[1])) {
        fail(`${what}: ${JSON.stringify(path)} is not an index path [section, item]`);
    }
}

function groups(changeset) {
    const sections = changeset?.sections;
    const items = changeset?.items;
    const kinds = ["deleted", "inserted", "moved", "updated"];
    for (const [name, group] of [["sections", sections], ["items", items]]) {
        if (typeof group !== "object" || group === null) fail(`the changeset has no "${name}" object`);
        for (const kind of kinds) {
            if (!Array.isArray(group[kind])) fail(`${name}.${kind} is not an array`);
        }
    }
    return { sections, items };
}

/**
 * Applies a changeset to `sections` ([{id, data, items: [{id, data}]}]) and returns the new sections, leaving
 * the input untouched (unchanged sections and items keep their identity, as React and Vue like).
 *
 * UIKit's batch semantics: `deleted` and the sources of `moved` are indices before the batch, `inserted` and
 * the destinations of `moved` indices after it, all applied as one batch; then `updated` at indices after it.
 * Throws a ChangesetError when the changeset does not fit: an id that is not where the changeset says, an
 * index out of range or used twice, a batch that leaves holes.
 *
 * - Complexity: O(n) in the number of sections and items.
 */
export function applyChangeset(sections, changeset) {
    if (!Array.isArray(sections)) fail("sections is not an array");
    const { sections: sectionChanges, items: itemChanges } = groups(changeset);

    // Sections: remove the deleted and moved ones at their old indices, place the inserted and moved ones at
    // their new indices, and let the others keep their relative order in the holes.
    const oldCount = sections.length;
    const removedSections = new Set();
    const removeSection = (index, id, what) => {
        if (!isIndex(index, oldCount)) fail(`${what}: section ${index} is out of range 0..<${oldCount}`);
        if (sections[index].id !== id) fail(`${what}: section ${index} is "${sections[index].id}", not "${id}"`);
        if (removedSections.has(index)) fail(`${what}: section ${index} is removed twice`);
        removedSections.add(index);
    };
    for (const entry of sectionChanges.deleted) removeSection(entry.index, entry.id, "sections.deleted");
    for (const entry of sectionChanges.moved) removeSection(entry.from, entry.id, "sections.moved");
    const newCount = oldCount - sectionChanges.deleted.length + sectionChanges.inserted.length;
    if (newCount < 0) fail("sections: more sections removed than there are");
    // Each slot holds {old: index before the batch} or {inserted: entry}.
    const sectionSlots = new Array(newCount);
    for (const entry of sectionChanges.inserted) {
        if (typeof entry.id !== "string") fail("sections.inserted: an entry has no id");
        place(sectionSlots, entry.index, { inserted: entry }, "sections.inserted");
    }
    for (const entry of sectionChanges.moved) place(sectionSlots, entry.to, { old: entry.from }, "sections.moved");
    const stayingSections = [];
    for (let index = 0; index < oldCount; index += 1) {
        if (!removedSections.has(index)) stayingSections.push({ old: index });
    }
    fillHoles(sectionSlots, stayingSections, "sections");
    const newIndexOfOldSection = new Map();
    sectionSlots.forEach((slot, index) => {
        if (slot.old !== undefined) newIndexOfOldSection.set(slot.old, index);
    });

    // Items: the same, per section, with sources in old coordinates and destinations in new ones.
    const removedItems = new Map(); // old section index -> Set of old item indices
    const removeItem = (at, id, what) => {
        checkPath(at, what);
        const [section, index] = at;
        if (!isIndex(section, oldCount)) fail(`${what}: section ${section} is out of range 0..<${oldCount}`);
        const items = sections[section].items;
        if (!isIndex(index, items.length)) fail(`${what}: item ${index} of section ${section} is out of range`);
        if (items[index].id !== id) fail(`${what}: item [${section}, ${index}] is "${items[index].id}", not "${id}"`);
        if (sectionChanges.deleted.some((entry) => entry.index === section)) {
            fail(`${what}: item "${id}" is in deleted section ${section}`);
        }
        let set = removedItems.get(section);
        if (!set) removedItems.set(section, (set = new Set()));
        if (set.has(index)) fail(`${what}: item [${section}, ${index}] is removed twice`);
        set.add(index);
        return items[index];
    };
    for (const entry of itemChanges.deleted) removeItem(entry.at, entry.id, "items.deleted");
    const arrivals = new Map(); // new section index -> [[index, item]]
    const arrive = (at, item, what) => {
        checkPath(at, what);
        if (!isIndex(at[0], newCount)) fail(`${what}: section ${at[0]} is out of range 0..<${newCount}`);
        if (sectionSlots[at[0]].inserted) fail(`${what}: item "${item.id}" goes into inserted section ${at[0]}`);
        let list = arrivals.get(at[0]);
        if (!list) arrivals.set(at[0], (list = []));
        list.push([at[1], item]);
    };
    for (const entry of itemChanges.moved) {
        const item = removeItem(entry.from, entry.id, "items.moved");
        arrive(entry.to, item, "items.moved");
    }
    for (const entry of itemChanges.inserted) {
        if (typeof entry.id !== "string") fail("items.inserted: an entry has no id");
        arrive(entry.at, { id: entry.id, data: entry.data ?? null }, "items.inserted");
    }

    const result = sectionSlots.map((slot, newIndex) => {
        if (slot.inserted) {
            const entry = slot.inserted;
            const items = (entry.items ?? []).map((item) => ({ id: item.id, data: item.data ?? null }));
            return { id: entry.id, data: entry.data ?? null, items };
        }
        const old = sections[slot.old];
        const removed = removedItems.get(slot.old);
        const incoming = arrivals.get(newIndex);
        if (!removed && !incoming) return old;
        const staying = removed ? old.items.filter((_, index) => !removed.has(index)) : old.items;
        const itemSlots = new Array(staying.length + (incoming?.length ?? 0));
        for (const [index, item] of incoming ?? []) place(itemSlots, index, item, `items of section ${newIndex}`);
        return { ...old, items: fillHoles(itemSlots, staying, `items of section ${newIndex}`) };
    });

    // Updates, at indices after the batch.
    for (const entry of sectionChanges.updated) {
        if (!isIndex(entry.index, result.length)) fail(`sections.updated: section ${entry.index} is out of range`);
        const section = result[entry.index];
        if (section.id !== entry.id) fail(`sections.updated: section ${entry.index} is "${section.id}", not "${entry.id}"`);
        result[entry.index] = { ...section, data: entry.data ?? null };
    }
    const copied = new Set();
    for (const entry of itemChanges.updated) {
        checkPath(entry.at, "items.updated");
        const [sectionIndex, index] = entry.at;
        if (!isIndex(sectionIndex, result.length)) fail(`items.updated: section ${sectionIndex} is out of range`);
        let section = result[sectionIndex];
        if (!isIndex(index, section.items.length)) fail(`items.updated: item [${sectionIndex}, ${index}] is out of range`);
        if (section.items[index].id !== entry.id) {
            fail(`items.updated: item [${sectionIndex}, ${index}] is "${section.items[index].id}", not "${entry.id}"`);
        }
        if (!copied.has(sectionIndex)) {
            section = result[sectionIndex] = { ...section, items: section.items.slice() };
            copied.add(sectionIndex);
        }
        section.items[index] = { id: entry.id, data: entry.data ?? null };
    }

    const ids = new Set();
    for (const section of result) {
        for (const item of section.items) {
            if (ids.has(item.id)) fail(`item "${item.id}" appears twice after the changeset`);
            ids.add(item.id);
        }
    }
    return result;
}

/** The k-th (0-based) index not in `taken`, counting from 0. `taken` is a sorted array of indices. */
function nthFree(taken, k) {
    let index = k;
    for (const used of taken) {
        if (used <= index) index += 1;
        else break;
    }
    return index;
}

/** How many of the sorted `indices` are below `value`. */
function countBelow(indices, value) {
    let count = 0;
    for (const index of indices) {
        if (index < value) count += 1;
        else break;
    }
    return count;
}

const ascending = (a, b) => a - b;

/** The new index of the section that was at `section` before the changeset, or null when it was deleted. */
export function mapSectionIndex(changeset, section) {
    const { sections } = groups(changeset);
    if (sections.deleted.some((entry) => entry.index === section)) return null;
    const moved = sections.moved.find((entry) => entry.from === section);
    if (moved) return moved.to;
    const removed = [...sections.deleted.map((e) => e.index), ...sections.moved.map((e) => e.from)].sort(ascending);
    const taken = [...sections.inserted.map((e) => e.index), ...sections.moved.map((e) => e.to)].sort(ascending);
    return nthFree(taken, section - countBelow(removed, section));
}

/**
 * The index path after the changeset of the item that was at `[section, index]` before it, or null when the
 * item was deleted, or its section was (an item of a section that is sent as a delete plus an insert has no
 * old coordinates to follow: look it up by id). A client keeps its scroll anchor with it.
 *
 * - Complexity: O(k log k) in the number of entries of the changeset.
 */
export function mapIndexPath(changeset, [section, index]) {
    const { items } = groups(changeset);
    const same = (path) => path[0] === section && path[1] === index;
    if (items.deleted.some((entry) => same(entry.at))) return null;
    const moved = items.moved.find((entry) => same(entry.from));
    if (moved) return [moved.to[0], moved.to[1]];
    const newSection = mapSectionIndex(changeset, section);
    if (newSection === null) return null;
    const removed = [...items.deleted.map((e) => e.at), ...items.moved.map((e) => e.from)]
        .filter((path) => path[0] === section)
        .map((path) => path[1])
        .sort(ascending);
    const taken = [...items.inserted.map((e) => e.at), ...items.moved.map((e) => e.to)]
        .filter((path) => path[0] === newSection)
        .map((path) => path[1])
        .sort(ascending);
    return [newSection, nthFree(taken, index - countBelow(removed, index))];
}

/** True when the changeset changes nothing. */
export function isEmptyChangeset(changeset) {
    const { sections, items } = groups(changeset);
    return [sections, items].every((group) => Object.values(group).every((list) => list.length === 0));
}

// MARK: - The client loop

const sleep = (milliseconds, signal) =>
    new Promise((resolve) => {
        if (signal.aborted) return resolve();
        const timer = setTimeout(done, milliseconds);
        function done() {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resolve();
        }
        signal.addEventListener("abort", done, { once: true });
    });

/** Why a request was given up: the page was hidden (`pageGate`). */
class PageHidden extends Error {}

/**
 * The page's visibility to a feed loop, in a browser: a page the browser keeps in its back/forward cache after the
 * user left it goes on running, its held poll with it, and each such poll holds one of the six connections a
 * browser opens to a host: six of them stalled the load of the next page of that host for the length of a poll.
 * `pagehide` calls the interrupts registered (the request in flight is aborted, the stream closed), and the loop
 * waits for `pageshow` (`shown`) before it goes on from its version. Outside a browser the page is always shown.
 */
function pageGate(signal) {
    const target = typeof globalThis.addEventListener === "function" && typeof globalThis.document === "object" ? globalThis : null;
    let hidden = null;
    const interrupts = new Set();
    const onHide = () => {
        if (!hidden) {
            let resolve;
            const promise = new Promise((done) => (resolve = done));
            hidden = { promise, resolve };
        }
        for (const interrupt of [...interrupts]) interrupt();
    };
    const onShow = () => {
        const was = hidden;
        hidden = null;
        was?.resolve();
    };
    if (target && !signal.aborted) {
        target.addEventListener("pagehide", onHide);
        target.addEventListener("pageshow", onShow);
        signal.addEventListener(
            "abort",
            () => {
                target.removeEventListener("pagehide", onHide);
                target.removeEventListener("pageshow", onShow);
                onShow();
            },
            { once: true }
        );
    }
    return {
        get hidden() {
            return hidden !== null;
        },
        /** Resolves once the page is shown (at once when it is), or the subscription ends. */
        shown: () => hidden?.promise ?? Promise.resolve(),
        /** Calls `interrupt` whenever the page is hidden, until the function returned is called. */
        whenHidden(interrupt) {
            interrupts.add(interrupt);
            return () => interrupts.delete(interrupt);
        },
    };
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or null. */
export function retryAfterSeconds(value, now = Date.now()) {
    if (value == null || value === "") return null;
    if (/^\d+$/.test(value.trim())) return Number(value.trim());
    const date = Date.parse(value);
    return Number.isNaN(date) ? null : Math.max(0, (date - now) / 1000);
}

/**
 * The delay before retry number `attempt` (0-based): full jitter, a random time between 0 and
 * min(cap, base * 2^attempt), but never shorter than what Retry-After asks for.
 */
export function backoffDelay(attempt, { baseMs = 250, capMs = 15000, retryAfter = null, random = Math.random } = {}) {
    const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
    const jittered = random() * ceiling;
    return retryAfter == null ? jittered : Math.max(jittered, retryAfter * 1000);
}

/**
 * The text of `response`'s body, calling `progress()` when the answer begins and at every piece of it that
 * arrives. A body without a stream (some `fetch` replacements) is read whole.
 */
async function readText(response, progress) {
    progress();
    if (!response.body?.getReader) return response.text();
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
        const { done, value } = await reader.read();
        if (done) return text + decoder.decode();
        progress();
        text += decoder.decode(value, { stream: true });
    }
}

/** The longest a server holds a poll, in seconds (API.md: a `timeout` above it is clamped). */
const MAXIMUM_TIMEOUT = 300;

/**
 * Whether an empty answer to a poll with timeout `pollTimeout` (seconds), held `heldMs`, came back quick: in less
 * than half the timeout (as the server clamps it). The server answers empty only once it held a poll its whole
 * timeout; a quick empty answer came from a shared cache, or from a cache or server that misbehaves.
 */
export function isQuickEmptyAnswer(heldMs, pollTimeout) {
    return heldMs < (Math.min(pollTimeout, MAXIMUM_TIMEOUT) * 1000) / 2;
}

/**
 * Milliseconds to wait after the `inARow`-th quick empty answer in a row (1-based). The first is re-polled at once:
 * a shared cache gives a poll's answer to every client that joined it, also to one that joined late, and the next
 * poll is being held by the cache right now, so polling at once puts the late client back in step with the others
 * (waiting would keep it late, and a client later than the cache keeps an empty answer reaches the server on its
 * own). More in a row mean a cache or server that answers empty at once (one that ignores the query string, say):
 * they back off as failures do, so the loop never spins.
 */
export function quickEmptyWait(inARow, backoff = {}) {
    return inARow <= 1 ? 0 : backoffDelay(inARow - 2, backoff);
}

/**
 * The `timeout` a subscription polls with: whole seconds from 1 to 300. The server answers `timeout=0` at once, so
 * with 0 no empty answer would count as quick (`isQuickEmptyAnswer`) and the loop would poll as fast as the
 * server answers.
 */
export function pollSeconds(timeout) {
    const seconds = Math.floor(Number(timeout));
    return Number.isFinite(seconds) ? Math.min(Math.max(seconds, 1), MAXIMUM_TIMEOUT) : 25;
}

/**
 * Milliseconds to wait before the `inARow`-th start over in a row (1-based: `410`s, changesets that do not start
 * where the client is or do not fit, with nothing applied in between): the first at once, the next ones backing
 * off as failures do, so that a cache that keeps serving a stale answer cannot make the client spin.
 */
function startOverWait(inARow, backoff = {}) {
    return quickEmptyWait(inARow, backoff);
}

/** The query string of a poll from `since`, when the server gave no `next`. */
function pollQuery(since, timeout) {
    return `since=${encodeURIComponent(since)}&timeout=${timeout}`;
}

/**
 * The query string to poll with after an answer that reached `body.to`: the server's `next` (API.md: it may carry
 * a cache-busting `cursor`, and following it is what lets a shared cache collapse polls) when it starts from
 * `body.to`, else one made here.
 */
export function nextQuery(body, timeout) {
    const next = body?.next;
    if (typeof next === "string" && new URLSearchParams(next).get("since") === body.to) return next;
    return pollQuery(body.to, timeout);
}

/**
 * The query of the next poll, `query` (`nextQuery`'s): with `timeout=0` for a short one (`short`), and with
 * `timeout` again after one, whose answer's `next` keeps its 0 and a cursor counted in seconds, which would keep
 * the client's polls apart from everyone else's (whose cursors count timeouts) until the collection changes.
 */
function pollingQuery(query, short, timeout) {
    const params = new URLSearchParams(query);
    if (short) {
        if (params.get("timeout") === "0") return query;
        params.set("timeout", "0");
    } else {
        if (params.get("timeout") !== "0") return query;
        params.set("timeout", String(timeout));
        params.delete("cursor");
    }
    return params.toString();
}

/**
 * How long snapshots at the epoch a `410 collection_deleted` ended are waited out: far past a cache's 2 s and a
 * server catching up; past it such a snapshot is taken as it is (the epoch came back, as after a crash that lost
 * the deletion under `--fsync interval`), rather than the collection shown missing for good.
 */
const STALE_RESET_PATIENCE_MS = 10_000;

/** The epoch of a version `<epoch>.<seq>`. */
function epochOf(version) {
    return typeof version === "string" ? version.slice(0, Math.max(version.lastIndexOf("."), 0)) : null;
}

/**
 * Subscriptions open in this page, by origin, for `noteSubscription`. Over plain `http:` a browser speaks HTTP/1.1
 * and opens at most six connections to a host, and each subscription holds one while its poll or stream waits: with
 * six open, a write to that host waited a poll's length (24 s, measured in Chromium), and a seventh stream never
 * opened. HTTPS lets the browser speak HTTP/2, which carries them all on one connection.
 */
const openSubscriptions = new Map();
/** Origins warned about, once each. */
const warnedOrigins = new Set();
/** Subscriptions to one `http:` origin that leave a single connection for everything else. */
const HTTP1_SUBSCRIPTION_WARNING = 5;

/**
 * Counts a subscription to `base` while `signal` is not aborted, and warns on the console once per origin when
 * `HTTP1_SUBSCRIPTION_WARNING` of them are open to a plain `http:` origin.
 */
function noteSubscription(base, signal) {
    let origin;
    try {
        origin = new URL(base || ".", globalThis.location?.href).origin;
    } catch {
        return;
    }
    if (!origin.startsWith("http:")) return;
    const count = (openSubscriptions.get(origin) ?? 0) + 1;
    openSubscriptions.set(origin, count);
    signal.addEventListener(
        "abort",
        () => {
            const left = (openSubscriptions.get(origin) ?? 1) - 1;
            if (left > 0) openSubscriptions.set(origin, left);
            else openSubscriptions.delete(origin);
        },
        { once: true }
    );
    if (count < HTTP1_SUBSCRIPTION_WARNING || warnedOrigins.has(origin)) return;
    warnedOrigins.add(origin);
    console.warn(
        `changefeed.js: ${count} subscriptions to ${origin} are open in this page. Over plain http a browser opens ` +
            "at most 6 connections to a host, for all its tabs together, and each subscription holds one while its " +
            "poll or stream waits: from the 6th (other tabs' included), writes and other requests to that host wait " +
            "up to a poll's length, and a 7th stream never opens. Serve the server through HTTPS (HTTP/2 carries " +
            "every subscription on one connection), or follow fewer collections."
    );
}

/**
 * Follows a collection, or a view with `options.kind` "view": `handlers.onSnapshot({sections, version, collection,
 * kind})` (`collection`: the name followed, a view's too) whenever the client (re)starts from a snapshot,
 * `handlers.onChangeset({changeset, sections, previous, from, to})` for every changeset applied (one for each new
 * version; its arrays may all be empty: a view redefined to the same content has a new version and nothing to move),
 * `handlers.onStatus(status, detail)` with "connecting", "live", "retrying", "reset" (a 410), "missing" (a 404
 * saying the collection or view does not exist: the client waits for it) or "stopped", and `handlers.onError(error)`
 * for errors it retries after (a 404 of no such route among them: a wrong base URL).
 *
 * options: `kind` ("collection", the default, or "view"), `token` (bearer), `timeout` (seconds a poll is held,
 * default 25), `silenceSeconds` (how long past a poll's hold an answer may take to begin, and a body may pause,
 * before the connection is given up as vanished and polled again, default 30), `baseMs`/`capMs` (backoff),
 * `missingRetryMs` (how often a missing collection or view is looked for again, default 2000), `fetch`, `signal`,
 * `transport` ("poll", the default, or "sse": Server-Sent Events, falling back to long-polling when no stream
 * can be opened, e.g. with a `token`, which EventSource cannot send) and `EventSource` (the class to use).
 *
 * Returns {unsubscribe(), done, version, sections}: `unsubscribe` aborts the request in flight and `done`
 * resolves when the loop has stopped.
 */
export function subscribe(baseURL, name, handlers = {}, options = {}) {
    const controller = new AbortController();
    const signal = controller.signal;
    if (options.signal) {
        if (options.signal.aborted) controller.abort();
        else options.signal.addEventListener("abort", () => controller.abort(), { once: true });
    }
    const fetchFunction = options.fetch ?? globalThis.fetch.bind(globalThis);
    const pollTimeout = pollSeconds(options.timeout ?? 25);
    const backoffOptions = { baseMs: options.baseMs, capMs: options.capMs };
    /** Start overs in a row (`startOverWait`), in either transport. */
    let startOvers = 0;
    const silenceSeconds = options.silenceSeconds ?? 30;
    /**
     * How long past a poll's hold its answer may take to begin before the status says "retrying" (reason
     * "silence") while the poll still waits, until `silenceSeconds` give it up: a network that swallows requests
     * showed "live" over stale data for the hold and the silence both (55 s by default), where a server answers a
     * held poll within about a second of its hold, a cache in front within two.
     */
    const lateSeconds = Math.min(5, silenceSeconds / 2);
    const kind = options.kind ?? "collection";
    if (kind !== "collection" && kind !== "view") {
        throw new TypeError(`options.kind is "collection" or "view", not ${JSON.stringify(kind)}`);
    }
    const base = String(baseURL ?? "").replace(/\/+$/, "");
    const feedURL = `${base}/v1/${kind === "view" ? "views" : "collections"}/${encodeURIComponent(name)}`;
    /** The code of a `404` that says the collection (or view) does not exist, rather than that no route matched. */
    const missingCode = kind === "view" ? "view_not_found" : "collection_not_found";
    if (!signal.aborted) noteSubscription(base, signal);
    const state = { version: null, sections: null, next: null };
    const page = pageGate(signal);
    /**
     * The epoch a `410 collection_deleted` said was deleted, until a snapshot of another epoch comes: a snapshot at
     * that epoch is the one from before the deletion, a shared cache's copy (resets may be kept 2 s) or a server
     * that has not applied the deletion yet, and is waited out rather than shown as live.
     */
    let deletedEpoch = null;
    /** When (`Date.now()`) the `410` came: after `STALE_RESET_PATIENCE_MS` a snapshot at that epoch is taken. */
    let deletedAt = 0;
    /** Snapshots at `deletedEpoch` in a row, for their backoff. */
    let staleResets = 0;
    /**
     * Whether `body`, a reset, is from before the deletion a `410` reported (`deletedEpoch`): then the collection
     * is gone, and the client says "missing" (nothing to show) and counts it for the backoff.
     */
    const isStale = (body, setStatus) => {
        const waited = Date.now() - deletedAt > STALE_RESET_PATIENCE_MS;
        if (deletedEpoch === null || epochOf(body.to) !== deletedEpoch || waited) {
            deletedEpoch = null;
            staleResets = 0;
            return false;
        }
        staleResets += 1;
        state.sections = null;
        setStatus("missing");
        return true;
    };
    /** A `410` to a poll or stream from `since`: it starts over, noting the epoch a deletion ended. */
    const gone = (since, code, setStatus) => {
        if (code === "collection_deleted") {
            deletedEpoch = epochOf(since);
            deletedAt = Date.now();
        }
        state.version = null;
        setStatus("reset", { reason: code ?? "gone" });
    };
    const call = (handler, ...args) => {
        try {
            handlers[handler]?.(...args);
        } catch (error) {
            // A handler that throws must not stop the feed; report it where it can be seen.
            if (handler !== "onError") call("onError", error);
            else console.error(error);
        }
    };

    /**
     * GETs `url`, a poll the server may hold `holdSeconds`. The server ends a held poll by itself; a server or
     * proxy that vanished silently is given up `silenceSeconds` past the hold with no answer begun, or that long
     * without a byte while the body arrives (so a large snapshot on a slow network is never cut while it flows).
     */
    async function request(url, holdSeconds, onLate) {
        const headers = { Accept: "application/json" };
        if (options.token) headers.Authorization = `Bearer ${options.token}`;
        const deadline = new AbortController();
        const silent = (seconds) => () =>
            deadline.abort(new Error(`nothing from the server for ${seconds} s: giving the connection up`));
        let timer = setTimeout(silent(holdSeconds + silenceSeconds), (holdSeconds + silenceSeconds) * 1000);
        const late = onLate ? setTimeout(onLate, (holdSeconds + lateSeconds) * 1000) : null;
        const onAbort = () => deadline.abort();
        signal.addEventListener("abort", onAbort, { once: true });
        const stopWatching = page.whenHidden(() => deadline.abort(new PageHidden("the page was hidden")));
        try {
            const response = await fetchFunction(url, { headers, signal: deadline.signal, cache: "no-store" });
            clearTimeout(late);
            const text = await readText(response, () => {
                clearTimeout(timer);
                timer = setTimeout(silent(silenceSeconds), silenceSeconds * 1000);
            });
            let body = null;
            try {
                body = text ? JSON.parse(text) : null;
            } catch {
                body = null;
            }
            return { status: response.status, headers: response.headers, body };
        } catch (error) {
            // Some fetch implementations (node 18's) reject with a bare AbortError, not the reason given to abort().
            throw deadline.signal.aborted && deadline.signal.reason instanceof Error ? deadline.signal.reason : error;
        } finally {
            clearTimeout(timer);
            clearTimeout(late);
            signal.removeEventListener("abort", onAbort);
            stopWatching();
        }
    }

    /**
     * Follows the collection over Server-Sent Events until `signal` aborts (resolves "aborted"), the page is
     * hidden ("hidden", `pageGate`), or the browser gives the stream up: an HTTP error such as a proxy's 502 while
     * the server restarts, a 404 or a 429, which EventSource does not retry. It then resolves "delivered" when the
     * stream brought an event, else "refused"; the caller long-polls from where the client is, and tries a stream
     * again later (`run`). A dropped stream is reopened by EventSource itself, with Last-Event-ID. A stream
     * that delivers no event for `silenceSeconds` is reopened here from the client's version: EventSource has no
     * read timeout and does not show the server's heartbeats (comments), so a stream that a proxy or a network
     * stopped forwarding without closing it would otherwise be taken for live, and show stale data, for good.
     */
    function stream(setStatus) {
        const EventSourceClass = options.EventSource ?? globalThis.EventSource;
        if (signal.aborted) return Promise.resolve("aborted");
        return new Promise((resolve) => {
            let source = null;
            let silence = null;
            /** The check that a stream reopened after a silence opened (`watch`). */
            let late = null;
            let delivered = false;
            const parse = (event) => {
                try {
                    return JSON.parse(event.data);
                } catch {
                    return null;
                }
            };
            let reopening = null;
            const finish = (result) => {
                clearTimeout(silence);
                clearTimeout(late);
                clearTimeout(reopening);
                source?.close();
                signal.removeEventListener("abort", onAbort);
                stopWatching();
                resolve(result);
            };
            const stopWatching = page.whenHidden(() => finish("hidden"));
            /**
             * (Re)starts the wait for the stream's next event; past it, the stream is reopened from the client's
             * version, with no status of its own: an idle collection's stream is reopened so every `silenceSeconds`
             * (a request each time, as a poll's), and one that cannot be reopened reports "retrying" as any other.
             * A stream still waiting for its answer's headers by then (a network or a proxy that swallows
             * requests without refusing them) reports "retrying" (reason "silence") before it is reopened, and so
             * does one reopened from an open stream that has not opened `lateSeconds` later (a network that
             * stopped forwarding an open stream): the data shown may be stale, and "live" comes back with the
             * next stream that opens.
             */
            const watch = () => {
                clearTimeout(silence);
                silence = setTimeout(() => {
                    const swallowed = source.readyState === (EventSourceClass.CONNECTING ?? 0);
                    if (swallowed) setStatus("retrying", { reason: "silence" });
                    source.close();
                    open();
                    if (swallowed) return;
                    // The stream that fell silent was open: an idle collection's, or one a network stopped
                    // forwarding. Its successor that has not opened `lateSeconds` later says which.
                    clearTimeout(late);
                    late = setTimeout(() => {
                        if (source.readyState === (EventSourceClass.CONNECTING ?? 0)) {
                            setStatus("retrying", { reason: "silence" });
                        }
                    }, lateSeconds * 1000);
                }, silenceSeconds * 1000);
            };
            const onAbort = () => finish("aborted");
            const givenUp = () => finish(delivered ? "delivered" : "refused");
            const reopenAfter = (wait) => {
                if (wait === 0) open();
                else reopening = setTimeout(open, wait);
            };
            const startOver = (reason) => {
                clearTimeout(silence);
                source.close();
                gone(state.version, reason, setStatus);
                startOvers += 1;
                reopenAfter(startOverWait(startOvers, backoffOptions));
            };
            const open = () => {
                const query = state.version === null ? "" : `?since=${encodeURIComponent(state.version)}`;
                source = new EventSourceClass(`${feedURL}/changes${query}`);
                watch();
                source.addEventListener("reset", (event) => {
                    watch();
                    const body = parse(event);
                    if (typeof body?.to !== "string" || !Array.isArray(body?.snapshot?.sections)) {
                        call("onError", new FeedError(200, body, "the reset event has no snapshot"));
                        return givenUp();
                    }
                    if (isStale(body, setStatus)) {
                        clearTimeout(silence);
                        source.close();
                        return reopenAfter(backoffDelay(staleResets, backoffOptions));
                    }
                    delivered = true;
                    state.version = body.to;
                    state.sections = body.snapshot.sections;
                    call("onSnapshot", { sections: state.sections, version: state.version, collection: name, kind });
                    setStatus("live");
                });
                source.addEventListener("changes", (event) => {
                    watch();
                    const body = parse(event);
                    const since = state.version;
                    if (body?.from !== since || typeof body?.to !== "string") {
                        call("onError", new FeedError(200, body, `a changeset from ${body?.from} while at ${since}`));
                        return startOver("mismatch");
                    }
                    let next;
                    try {
                        next = applyChangeset(state.sections, body.changes);
                    } catch (error) {
                        call("onError", error);
                        return startOver("inconsistent");
                    }
                    const previous = state.sections;
                    state.sections = next;
                    state.version = body.to;
                    startOvers = 0;
                    delivered = true;
                    setStatus("live");
                    call("onChangeset", { changeset: body.changes, sections: next, previous, from: since, to: body.to });
                });
                source.addEventListener("gone", (event) => startOver(parse(event)?.error?.code ?? "gone"));
                source.addEventListener("open", () => {
                    watch();
                    if (state.version !== null) setStatus("live");
                });
                source.addEventListener("error", () => {
                    if (source.readyState === (EventSourceClass.CLOSED ?? 2)) givenUp();
                    else setStatus("retrying", { reason: "stream" });
                });
            };
            signal.addEventListener("abort", onAbort, { once: true });
            open();
        });
    }

    async function run() {
        let failures = 0;
        let status = null;
        const setStatus = (next, detail) => {
            if (next === status && next !== "retrying") return;
            status = next;
            call("onStatus", next, detail);
        };
        /**
         * Whether the last request failed (a network error, `429`, `5xx`...): the next poll is a short one
         * (`timeout=0`), answered at once, so that the client says "live" as soon as the server answers again
         * rather than once a held poll ends, up to `timeout` seconds later.
         */
        let recovering = false;
        const backOff = async (retryAfter, reason) => {
            const delay = backoffDelay(failures, { baseMs: options.baseMs, capMs: options.capMs, retryAfter });
            failures += 1;
            recovering = true;
            setStatus("retrying", { delay, reason, attempt: failures });
            await sleep(delay, signal);
        };
        const startOverPause = async () => {
            startOvers += 1;
            const wait = startOverWait(startOvers, backoffOptions);
            if (wait > 0) await sleep(wait, signal);
        };
        setStatus("connecting");
        // EventSource sends no headers, so a client with a token always long-polls.
        const streams = options.transport === "sse" && !options.token && Boolean(options.EventSource ?? globalThis.EventSource);
        /** Streams in a row given up before they brought an event, and when the next may be tried. */
        let refusedStreams = 0;
        let streamAgainAt = 0;
        /** Whether the last poll was answered 200: a stream given up is tried again only once the feed answers. */
        let answering = true;
        let quickEmpties = 0;
        while (!signal.aborted) {
            if (page.hidden) {
                await page.shown();
                continue;
            }
            if (streams && answering && Date.now() >= streamAgainAt) {
                const outcome = await stream(setStatus);
                if (outcome === "aborted") break;
                if (outcome === "hidden") continue;
                // Long-polls from where the stream left the client (the last poll's `next` may be older), first with
                // a short poll, and tries a stream again after the next answer: at once after one that delivered (a
                // restart behind a proxy that answered 502 meanwhile), backing off from 2 s to 5 min after those
                // that did not (a proxy or server that refuses streams).
                state.next = null;
                answering = false;
                recovering = true;
                refusedStreams = outcome === "delivered" ? 0 : refusedStreams + 1;
                streamAgainAt = refusedStreams === 0 ? 0 : Date.now() + Math.min(300_000, 1000 * 2 ** refusedStreams);
            }
            let answer;
            let asked;
            const since = state.version;
            const hold = since === null || recovering ? 0 : pollTimeout;
            try {
                const url =
                    since === null
                        ? `${feedURL}/changes?timeout=${pollTimeout}`
                        : `${feedURL}/changes?${pollingQuery(state.next ?? pollQuery(since, pollTimeout), recovering, pollTimeout)}`;
                asked = Date.now();
                // A poll from a version the page shows: an answer that is late says the data may be stale.
                const onLate = since === null ? null : () => setStatus("retrying", { reason: "silence" });
                answer = await request(url, hold, onLate);
            } catch (error) {
                if (signal.aborted) break;
                if (error instanceof PageHidden) continue;
                call("onError", error);
                await backOff(null, "network");
                continue;
            }
            if (signal.aborted) break;
            const { status: code, body } = answer;
            // A 200 without a JSON object is an answer cut short on its way (Chromium hands one cut inside its
            // headers to the page as a 200 with an empty body): a failed connection, polled again from where the
            // client is. Taken for a changeset, it threw the mirror away for a reset the server never asked for.
            if (code === 200 && (body === null || typeof body !== "object")) {
                call("onError", new FeedError(code, body, "an answer cut short: no JSON body"));
                await backOff(null, "network");
                continue;
            }
            if (code === 200) {
                recovering = false;
                answering = true;
            }
            if (code === 200 && since === null) {
                const snapshot = body?.snapshot;
                if (!body?.reset || typeof body.to !== "string" || !Array.isArray(snapshot?.sections)) {
                    call("onError", new FeedError(code, body, "the reset answer has no snapshot"));
                    await backOff(null, "malformed");
                    continue;
                }
                failures = 0;
                if (isStale(body, setStatus)) {
                    await sleep(backoffDelay(staleResets, backoffOptions), signal);
                    continue;
                }
                state.version = body.to;
                state.next = nextQuery(body, pollTimeout);
                state.sections = snapshot.sections;
                call("onSnapshot", { sections: state.sections, version: state.version, collection: name, kind });
                setStatus("live");
            } else if (code === 200) {
                if (body?.from !== since || typeof body?.to !== "string") {
                    // Never apply a changeset that does not start where the client is: start over instead.
                    call("onError", new FeedError(code, body, `a changeset from ${body?.from} while at ${since}`));
                    state.version = null;
                    setStatus("reset", { reason: "mismatch" });
                    await startOverPause();
                    continue;
                }
                // Only a held poll's answer ends the backoff: a server that refuses held polls (`429` at
                // `--max-held-polls`) answers the short one all the same.
                if (hold > 0) failures = 0;
                setStatus("live");
                if (body.to === since) {
                    startOvers = 0;
                    state.next = nextQuery(body, pollTimeout);
                    // An answer to a short poll is quick by design.
                    const quick = hold > 0 && isQuickEmptyAnswer(Date.now() - asked, pollTimeout);
                    quickEmpties = quick ? quickEmpties + 1 : 0;
                    const wait = quickEmptyWait(quickEmpties, backoffOptions);
                    if (wait > 0) await sleep(wait, signal);
                    continue;
                }
                quickEmpties = 0;
                let next;
                try {
                    next = applyChangeset(state.sections, body.changes);
                } catch (error) {
                    call("onError", error);
                    state.version = null;
                    setStatus("reset", { reason: "inconsistent" });
                    await startOverPause();
                    continue;
                }
                const previous = state.sections;
                state.sections = next;
                state.version = body.to;
                startOvers = 0;
                state.next = nextQuery(body, pollTimeout);
                call("onChangeset", { changeset: body.changes, sections: next, previous, from: since, to: body.to });
            } else if (code === 410) {
                failures = 0;
                recovering = false;
                gone(since, body?.error?.code, setStatus);
                await startOverPause();
            } else if (code === 404 && body?.error?.code === missingCode) {
                state.version = null;
                state.sections = null;
                setStatus("missing");
                await sleep(options.missingRetryMs ?? 2000, signal);
            } else if (code === 429 || code >= 500) {
                call("onError", new FeedError(code, body));
                await backOff(retryAfterSeconds(answer.headers.get("Retry-After")), `HTTP ${code}`);
            } else {
                // 400, 401, 403, a 404 of no such route (a base URL with a wrong path, a front's own page) ...:
                // retrying at once would only repeat it; report and retry slowly.
                call("onError", new FeedError(code, body));
                failures = Math.max(failures, 5);
                await backOff(null, `HTTP ${code}`);
            }
        }
        setStatus("stopped");
    }

    const done = run();
    return {
        unsubscribe() {
            controller.abort();
            return done;
        },
        done,
        get version() {
            return state.version;
        },
        get sections() {
            return state.sections;
        },
    };
}

// MARK: - Writes

/**
 * A write the server refused (`status`, and the contract's error body: `code`, `message`, `op` for a rejected op),
 * or one whose answer never came or could not be read (`status` 0). `outcomeUnknown` is true when the write may
 * have been committed all the same: `status` 0, or a `5xx` page that is not the server's (a front's `502`, `504`);
 * read before writing again. Every other refusal changed nothing.
 */
export class WriteError extends Error {
    constructor(status, body, message) {
        super(message ?? `HTTP ${status}: ${body?.error?.message ?? "unexpected answer"}`);
        this.name = "WriteError";
        this.status = status;
        this.code = body?.error?.code ?? null;
        this.op = body?.error?.op ?? null;
        /** The version a `412` names: where the collection is, for a conditional write decided again. */
        this.current = body?.current ?? null;
        this.body = body;
        this.outcomeUnknown = status === 0 || (this.code === null && status >= 500);
    }
}

/**
 * Writes to the server at `baseURL`, one request of the contract each, as `{version, changes, created}` (the
 * changeset is the one every subscriber gets: a page that follows the collection shows its own writes through its
 * subscription). Nothing is retried. `conditions`: `{ifMatch: version}` (the write is refused with `412` if the
 * collection is no longer at that version; a response's `ETag` is taken too), `{ifMatch: "*"}` (it exists),
 * `{ifNoneMatch: "*"}` (create only). A condition that is not a string (a subscription's `version` while the
 * collection is missing is `null`) is a `TypeError`.
 * `options`: `token` (write token), `fetch`.
 *
 *   const server = writer(location.origin);
 *   await server.mutate("board", [{ op: "moveItem", item: "c7", to: ["done", 0] }], { ifMatch: version });
 */
export function writer(baseURL, options = {}) {
    const base = String(baseURL ?? "").replace(/\/+$/, "");
    const fetchFunction = options.fetch ?? globalThis.fetch.bind(globalThis);
    /**
     * The path of a resource, each part one segment. Browsers (and fetch in node) remove the dot segments `.` and
     * `..` from URLs, escaped (`%2E`) or not, so `…/items/..` would reach the collection itself: such ids, and
     * empty ones, cannot be sent in a URL (write them with `mutate`).
     */
    const path = (...parts) => {
        for (const part of parts) {
            if (part === "" || part === "." || part === "..") {
                throw new TypeError(`the name or id ${JSON.stringify(part)} cannot be sent in a URL: use mutate`);
            }
        }
        return `${base}/v1/${parts.map((part) => encodeURIComponent(part)).join("/")}`;
    };

    /**
     * A condition's header value: `*`, a version (a snapshot's or an answer's `version`) quoted, or an entity tag
     * that is quoted already (a response's `ETag`, sent as it came). A subscription's `version` is `null` while the
     * collection is missing: a condition on it names nothing, and is a `TypeError` rather than a `400`.
     */
    const condition = (name, value) => {
        if (typeof value !== "string" || value === "") {
            throw new TypeError(`${name} must be a version, an ETag or "*", not ${JSON.stringify(value) ?? value}`);
        }
        return value === "*" || value.startsWith('"') || value.startsWith('W/"') ? value : `"${value}"`;
    };

    async function send(method, url, body, conditions = {}, expected = [200, 201]) {
        const headers = { Accept: "application/json" };
        if (body !== undefined) headers["Content-Type"] = "application/json";
        if (options.token) headers.Authorization = `Bearer ${options.token}`;
        if (conditions.ifMatch !== undefined) headers["If-Match"] = condition("ifMatch", conditions.ifMatch);
        if (conditions.ifNoneMatch !== undefined) {
            headers["If-None-Match"] = condition("ifNoneMatch", conditions.ifNoneMatch);
        }
        let response;
        let text;
        try {
            response = await fetchFunction(url, {
                method,
                headers,
                body: body === undefined ? undefined : JSON.stringify(body),
                cache: "no-store",
            });
            text = await response.text();
        } catch (error) {
            throw new WriteError(0, null, `no answer: ${error?.message ?? error}`);
        }
        let parsed = null;
        try {
            parsed = text ? JSON.parse(text) : null;
        } catch {
            parsed = null;
        }
        if (!expected.includes(response.status)) {
            // A success the method does not answer with (a front's own, say) says nothing of what was done.
            if (response.ok) throw new WriteError(0, parsed, `status ${response.status}, not ${expected.join(" or ")}`);
            throw new WriteError(response.status, parsed);
        }
        if (response.status === 204) return undefined;
        if (typeof parsed?.version !== "string" || typeof parsed?.changes !== "object") {
            throw new WriteError(0, parsed, `not a write's answer (${response.status}): ${text.slice(0, 200)}`);
        }
        return { version: parsed.version, changes: parsed.changes, created: response.status === 201 };
    }

    return {
        /** Creates the collection with `sections`, or replaces its whole content. */
        replace: async (name, sections, conditions) =>
            send("PUT", path("collections", name), { sections }, conditions),
        /** Applies `ops` in order, all or none (API.md's op table). */
        mutate: async (name, ops, conditions) =>
            send("POST", path("collections", name, "mutations"), { ops }, conditions),
        /** Creates or updates one item: `{data, section, index}`, each optional. */
        upsert: async (name, id, item = {}, conditions) =>
            send("PUT", path("collections", name, "items", id), item, conditions),
        deleteItem: async (name, id, conditions) =>
            send("DELETE", path("collections", name, "items", id), undefined, conditions),
        /** Resolves to nothing (`204`). */
        deleteCollection: async (name, conditions) =>
            send("DELETE", path("collections", name), undefined, conditions, [204]),
        /** Defines the view, or replaces its definition (`{source, filter, sectionBy, sortBy, limit}`). */
        defineView: async (name, definition, conditions) => send("PUT", path("views", name), definition, conditions),
        deleteView: async (name, conditions) => send("DELETE", path("views", name), undefined, conditions, [204]),
    };
}

// MARK: - The DOM renderer

/** The text a row shows for an item's data: `data.text` or `data.title` when a string, else its JSON. */
export function itemLabel(data) {
    if (data === null || data === undefined) return "";
    if (typeof data === "string") return data;
    if (typeof data === "object" && !Array.isArray(data)) {
        if (typeof data.text === "string") return data.text;
        if (typeof data.title === "string") return data.title;
    }
    return JSON.stringify(data);
}

/**
 * The text of a section's header: `data.title` or `data.text` when a string, a string `data`, the key of data that
 * is `{"key": ...}` alone (a view's section), else its id.
 */
export function sectionLabel(section) {
    const data = section.data;
    if (typeof data === "string") return data;
    if (data && typeof data === "object" && !Array.isArray(data)) {
        if (typeof data.title === "string") return data.title;
        if (typeof data.text === "string") return data.text;
        // Data that is a key alone, as a view's sections have (`{"key": <the value>}`, whose id is the key's JSON
        // text: "open" with its quotes).
        if ("key" in data && Object.keys(data).length === 1) {
            return typeof data.key === "string" ? data.key : JSON.stringify(data.key);
        }
    }
    return section.id;
}

const prefersReducedMotion = () =>
    typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;

/**
 * Renders sections into `container`, keyed by id: `<section class="cf-section" data-section-id>` with a
 * `<header class="cf-header">` and a `<ul class="cf-items">` of `<li class="cf-item" data-id>`.
 *
 * options: `renderItem(item, element)` and `renderHeader(section, element)` fill an element (default: the
 * labels above), `scroller` (the element that scrolls, default `container`), `empty` (text of the empty state),
 * `duration` (ms of the animations, default 300; 0 turns them off), `anchor` (default true).
 *
 * Returns {render(sections), apply(changeset, sections), destroy()}: `render` shows a snapshot as it is,
 * `apply` shows the sections after `changeset` with animations. Only live rows carry `data-id`; a row that is
 * collapsing out carries `data-leaving-id` instead.
 */
export function renderList(container, options = {}) {
    const doc = container.ownerDocument;
    const scroller = options.scroller ?? container;
    const duration = options.duration ?? 300;
    const anchoring = options.anchor !== false;
    const itemElements = new Map();
    const sectionElements = new Map();
    let currentSections = [];

    container.classList.add("cf-list");
    scroller.style.overflowAnchor = "none"; // this renderer anchors by itself, the same in every browser
    if (getComputedStyle(container).position === "static") container.style.position = "relative";
    const root = doc.createElement("div");
    root.className = "cf-sections";
    const empty = doc.createElement("div");
    empty.className = "cf-empty";
    empty.setAttribute("role", "status");
    empty.textContent = options.empty ?? "No items yet.";
    container.replaceChildren(root, empty);

    const fillItem = (element, item) => {
        if (options.renderItem) options.renderItem(item, element);
        else element.textContent = itemLabel(item.data);
    };
    const fillHeader = (element, section) => {
        if (options.renderHeader) options.renderHeader(section, element);
        else element.textContent = sectionLabel(section);
    };

    function itemElement(item) {
        let element = itemElements.get(item.id);
        if (!element) {
            element = doc.createElement("li");
            element.className = "cf-item";
            element.dataset.id = item.id;
            itemElements.set(item.id, element);
            element._cfData = undefined;
        }
        // applyChangeset keeps an unchanged item's object: nothing to compare then.
        if (element._cfItem === item) return element;
        element._cfItem = item;
        const key = JSON.stringify(item.data ?? null);
        if (element._cfData !== key) {
            element._cfData = key;
            fillItem(element, item);
        }
        return element;
    }

    function sectionElement(section) {
        let element = sectionElements.get(section.id);
        if (!element) {
            element = doc.createElement("section");
            element.className = "cf-section";
            element.dataset.sectionId = section.id;
            const header = doc.createElement("header");
            header.className = "cf-header";
            const list = doc.createElement("ul");
            list.className = "cf-items";
            element.append(header, list);
            sectionElements.set(section.id, element);
            element._cfData = undefined;
        }
        const key = JSON.stringify(section.data ?? null);
        if (element._cfData !== key) {
            element._cfData = key;
            fillHeader(element.firstElementChild, section);
        }
        return element;
    }

    /** Puts `children` into `parent` in order, moving only what is out of place. */
    function arrange(parent, children) {
        let cursor = parent.firstElementChild;
        for (const child of children) {
            if (child === cursor) {
                cursor = cursor.nextElementSibling;
            } else {
                parent.insertBefore(child, cursor);
            }
        }
        while (cursor) {
            const next = cursor.nextElementSibling;
            cursor.remove();
            cursor = next;
        }
    }

    /** Builds the DOM of `sections`; returns the elements that left (rows and sections). */
    function build(sections) {
        const liveItems = new Set();
        const liveSections = new Set();
        const sectionNodes = sections.map((section) => {
            const element = sectionElement(section);
            liveSections.add(section.id);
            const rows = section.items.map((item) => {
                liveItems.add(item.id);
                return itemElement(item);
            });
            arrange(element.lastElementChild, rows);
            return element;
        });
        const leaving = [];
        for (const [id, element] of itemElements) {
            if (liveItems.has(id)) continue;
            itemElements.delete(id);
            leaving.push(element);
        }
        for (const [id, element] of sectionElements) {
            if (liveSections.has(id)) continue;
            sectionElements.delete(id);
            leaving.push(element);
        }
        arrange(root, sectionNodes);
        const count = sections.reduce((sum, section) => sum + section.items.length, 0);
        empty.hidden = count !== 0;
        container.classList.toggle("cf-is-empty", count === 0);
        currentSections = sections;
        return leaving;
    }

    /** The top of an element's box in the viewport without the translation of a running animation. */
    function layoutTop(element) {
        const top = element.getBoundingClientRect().top;
        const transform = getComputedStyle(element).transform;
        if (!transform || transform === "none") return top;
        const match = /^matrix\(([^)]+)\)$/.exec(transform);
        return match ? top - Number(match[1].split(",")[5]) : top;
    }

    /** The first row or header whose bottom is below the scroller's top edge, with its offset from that edge. */
    function visibleAnchors() {
        if (!anchoring || scroller.scrollTop <= 0) return [];
        const top = scroller.getBoundingClientRect().top;
        const anchors = [];
        for (const element of root.querySelectorAll(".cf-item[data-id], .cf-section[data-section-id] > .cf-header")) {
            const rect = element.getBoundingClientRect();
            if (rect.bottom <= top) continue;
            const offset = layoutTop(element) - top;
            anchors.push({ element, offset });
            if (anchors.length >= 8 || offset > scroller.clientHeight) break;
        }
        return anchors;
    }

    function restoreAnchor(anchors) {
        const anchor = anchors.find(({ element }) => element.isConnected && root.contains(element));
        if (!anchor) return 0;
        const offset = layoutTop(anchor.element) - scroller.getBoundingClientRect().top;
        const delta = offset - anchor.offset;
        if (Math.abs(delta) >= 0.5) scroller.scrollTop += delta;
        return delta;
    }

    // Content that changes height outside a changeset (fonts, images, a renderItem that grows) keeps the anchor.
    let lastAnchors = [];
    const onScroll = () => {
        lastAnchors = visibleAnchors();
    };
    scroller.addEventListener("scroll", onScroll, { passive: true });
    const resizeObserver =
        typeof ResizeObserver === "function" && anchoring
            ? new ResizeObserver(() => {
                  if (lastAnchors.length) restoreAnchor(lastAnchors);
                  lastAnchors = visibleAnchors();
              })
            : null;
    resizeObserver?.observe(root);

    function animate(element, keyframes, extra = {}) {
        if (duration <= 0 || typeof element.animate !== "function" || prefersReducedMotion()) return null;
        return element.animate(keyframes, { duration, easing: "cubic-bezier(0.2, 0, 0, 1)", ...extra });
    }

    // Changesets that come faster than frames (a stream catching up, a burst of writes) are not each measured and
    // animated: the first of a frame is, the others of that frame only update the rows. Measuring every row for
    // each of them, a board of 5,000 cards took 5.5 s to show 200 moves a stream delivered back to back (1.1 s now).
    let animatedThisFrame = false;
    const nextFrame =
        typeof globalThis.requestAnimationFrame === "function"
            ? (callback) => globalThis.requestAnimationFrame(callback)
            : (callback) => setTimeout(callback, 16);

    return {
        /** Shows `sections` without animation (a snapshot, or a reset after a 410). */
        render(sections) {
            for (const element of build(sections)) element.remove();
            lastAnchors = visibleAnchors();
        },

        /** Shows `sections`, the state after `changeset`, animating what the changeset changed. */
        apply(changeset, sections) {
            const anchors = visibleAnchors();
            const moving = duration > 0 && !prefersReducedMotion() && !animatedThisFrame;
            if (moving) {
                animatedThisFrame = true;
                nextFrame(() => {
                    animatedThisFrame = false;
                });
            }
            // Where rows and headers were, for the animations (none to measure without them).
            const before = new Map();
            const shown = new Set(itemElements.values());
            const measure = (element) => before.set(element, element.getBoundingClientRect());
            if (moving) {
                for (const element of itemElements.values()) measure(element);
                for (const element of sectionElements.values()) measure(element.firstElementChild);
            }
            // Rows off screen before and after are not animated: an insertion at the top of a long list moved
            // every row below it, and animating each of them took seconds.
            const screen = scroller.getBoundingClientRect();
            const screenTop = Math.max(screen.top, 0);
            const screenBottom = Math.min(screen.bottom, globalThis.innerHeight ?? screen.bottom);
            const offScreen = (rect) => rect.bottom < screenTop || rect.top > screenBottom;

            const leaving = build(sections);
            for (const element of leaving) {
                if (element.dataset.id !== undefined) {
                    element.dataset.leavingId = element.dataset.id;
                    delete element.dataset.id;
                } else if (element.dataset.sectionId !== undefined) {
                    element.dataset.leavingSectionId = element.dataset.sectionId;
                    delete element.dataset.sectionId;
                }
                element.classList.add("cf-leaving");
                element.setAttribute("aria-hidden", "true");
                element.remove();
            }
            restoreAnchor(anchors);
            lastAnchors = visibleAnchors();
            const inserted = new Set(changeset?.items?.inserted?.map((entry) => entry.id) ?? []);
            for (const entry of changeset?.sections?.inserted ?? []) {
                for (const item of entry.items ?? []) inserted.add(item.id);
            }
            /** New rows carry `cf-inserted` for the animation's length, animated or not (pages style it). */
            const markInserted = (element) => {
                element.classList.add("cf-inserted");
                setTimeout(() => element.classList.remove("cf-inserted"), duration + 50);
            };
            if (!moving) {
                for (const [id, element] of itemElements) {
                    if (!shown.has(element) || inserted.has(id)) markInserted(element);
                }
                return;
            }
            // Leaving rows and sections collapse out of the flow, at the place on screen where they were seen.
            const box = container.getBoundingClientRect();
            for (const element of leaving) {
                const rect = before.get(element) ?? before.get(element.firstElementChild);
                if (!rect || duration <= 0 || prefersReducedMotion()) continue;
                Object.assign(element.style, {
                    position: "absolute",
                    top: `${rect.top - box.top - container.clientTop + container.scrollTop}px`,
                    left: `${rect.left - box.left - container.clientLeft + container.scrollLeft}px`,
                    width: `${rect.width}px`,
                    height: `${rect.height}px`,
                    margin: "0",
                    pointerEvents: "none",
                    transformOrigin: "top",
                });
                container.appendChild(element);
                const animation = animate(
                    element,
                    [
                        { opacity: 1, transform: "scaleY(1)" },
                        { opacity: 0, transform: "scaleY(0)" },
                    ],
                    { fill: "forwards" }
                );
                if (animation) animation.onfinish = () => element.remove();
                else element.remove();
            }

            const updated = new Set(changeset?.items?.updated?.map((entry) => entry.id) ?? []);
            // FLIP: rows that were shown glide from where they were to where they are.
            for (const [id, element] of itemElements) {
                const old = before.get(element);
                if (!shown.has(element) || inserted.has(id)) {
                    animate(element, [
                        { opacity: 0, transform: "translateY(-0.5em) scale(0.98)" },
                        { opacity: 1, transform: "none" },
                    ]);
                    markInserted(element);
                    continue;
                }
                if (!old) continue;
                const now = element.getBoundingClientRect();
                if (offScreen(old) && offScreen(now)) continue;
                const dx = old.left - now.left;
                const dy = old.top - now.top;
                if (Math.abs(dx) >= 1 || Math.abs(dy) >= 1) {
                    const glide = animate(element, [{ transform: `translate(${dx}px, ${dy}px)` }, { transform: "none" }]);
                    // A row that jumps over others (or to another column of a board) glides above them.
                    if (glide && (Math.abs(dy) > old.height * 1.5 || Math.abs(dx) >= old.width)) {
                        element.style.position ||= "relative";
                        element.style.zIndex = "1";
                        glide.onfinish = glide.oncancel = () => {
                            element.style.zIndex = "";
                            if (element.style.position === "relative") element.style.position = "";
                        };
                    }
                }
                if (updated.has(id)) {
                    animate(element, [{ backgroundColor: "var(--cf-flash, #fff3b0)" }, {}], {
                        duration: Math.max(duration * 2, 1),
                    });
                }
            }
            for (const element of sectionElements.values()) {
                const header = element.firstElementChild;
                const old = before.get(header);
                if (!old) {
                    animate(element, [{ opacity: 0 }, { opacity: 1 }]);
                    continue;
                }
                // Both ways: sections laid out in a row (the columns of a board) move sideways.
                const now = header.getBoundingClientRect();
                const dx = old.left - now.left;
                const dy = old.top - now.top;
                if (Math.abs(dx) >= 1 || Math.abs(dy) >= 1) {
                    animate(header, [{ transform: `translate(${dx}px, ${dy}px)` }, { transform: "none" }]);
                }
            }
            for (const entry of changeset?.sections?.updated ?? []) {
                const header = sectionElements.get(entry.id)?.firstElementChild;
                if (header) animate(header, [{ backgroundColor: "var(--cf-flash, #fff3b0)" }, {}], { duration: Math.max(duration * 2, 1) });
            }
        },

        /** The sections shown. */
        get sections() {
            return currentSections;
        },

        destroy() {
            scroller.removeEventListener("scroll", onScroll);
            resizeObserver?.disconnect();
            container.replaceChildren();
        },
    };
}
