import Model
import Synchronization

/// One view: its name and its live state (definition, content, versions, index) behind a lock, so that the view
/// changes atomically with each mutation of its source.
final class ViewEntry: Sendable {
    let name: String
    let live: Mutex<LiveView>
    /// The snapshot's JSON at one version, encoded once for all the reads at that version (`FeedSubject`).
    let encodedSnapshot = SnapshotCache()
    /// The polls and streams that follow it (`FeedSubject`).
    let followers = Followers()

    init(name: String, live: consuming LiveView) {
        self.name = name
        self.live = Mutex(live)
    }
}

/// The views the server holds, by name, and which views each source collection feeds.
final class ViewRegistry: Sendable {
    private struct State {
        var views: [String: ViewEntry] = [:]
        /// View names by the name of their source collection.
        var bySource: [String: Set<String>] = [:]
        /// The gate of each view whose definition implies one (`ViewGate`), by name.
        var gates: [String: ViewGate] = [:]
        /// Each source's views arranged for its writes, made when first asked for after its views changed.
        var dispatches: [String: ViewDispatch<ViewEntry>] = [:]
        /// Counts the changes of views and gates: a dispatch made outside the lock is kept only if none came
        /// meanwhile.
        var generation = 0
    }

    private let state = Mutex(State())

    func entry(_ name: String) -> ViewEntry? {
        state.withLock { $0.views[name] }
    }

    /// The source of the view `name` now; nil when there is no such view.
    func source(of name: String) -> String? {
        entry(name)?.live.withLock { $0.definition.source }
    }

    /// All views, sorted by name.
    func all() -> [ViewEntry] {
        state.withLock { Array($0.views.values) }.sorted { $0.name < $1.name }
    }

    /// The views named after `after` (all when nil), sorted by name, at most `limit`, taken under one lock (as
    /// `Registry.page`, so that a deletion meanwhile cannot empty a page); `hasMore` when more remain.
    func page(after: String?, limit: Int) -> (entries: [ViewEntry], hasMore: Bool) {
        let candidates = state.withLock { state in
            after.map { after in state.views.values.filter { $0.name > after } } ?? Array(state.views.values)
        }.sorted { $0.name < $1.name }
        return (Array(candidates.prefix(limit)), candidates.count > limit)
    }

    var count: Int { state.withLock { $0.views.count } }

    /// The views whose source is the collection `source`.
    func views(of source: String) -> [ViewEntry] {
        state.withLock { state in (state.bySource[source] ?? []).compactMap { state.views[$0] } }
    }

    /// The views of `source`, arranged to find those a change of it can touch (`ViewDispatch`).
    /// - Complexity: O(1), or O(v log v + t) for v views of the source and t values of their gates when they
    ///   changed since it was last asked, made outside the lock (long `in` lists make many values).
    func dispatch(of source: String) -> ViewDispatch<ViewEntry> {
        let found = state.withLock { state -> (ViewDispatch<ViewEntry>?, [(ViewEntry, ViewGate?)], Int) in
            if let dispatch = state.dispatches[source] { return (dispatch, [], state.generation) }
            let names = (state.bySource[source] ?? []).sorted()
            let views = names.compactMap { name in state.views[name].map { ($0, state.gates[name]) } }
            return (nil, views, state.generation)
        }
        if let dispatch = found.0 { return dispatch }
        // Kept only for sources with views: every collection written asks.
        guard !found.1.isEmpty else { return ViewDispatch([]) }
        let dispatch = ViewDispatch(found.1)
        state.withLock { state in
            if state.generation == found.2 { state.dispatches[source] = dispatch }
        }
        return dispatch
    }

    /// How many views read the collection `source`.
    func count(of source: String) -> Int {
        state.withLock { $0.bySource[source]?.count ?? 0 }
    }

    /// The names of the source collections some view reads.
    var sources: [String] { state.withLock { Array($0.bySource.keys) } }

    /// Adds a view (replacing one of its name) with its definition.
    func insert(_ entry: ViewEntry, definition: ViewDefinition) {
        let gate = definition.gate
        state.withLock { state in
            state.views[entry.name] = entry
            state.bySource[definition.source, default: []].insert(entry.name)
            state.gates[entry.name] = gate
            state.dispatches[definition.source] = nil
            state.generation += 1
        }
    }

    /// The view `name`, which read `old`, now has `definition`.
    func redefined(_ name: String, from old: String, to definition: ViewDefinition) {
        let gate = definition.gate
        state.withLock { state in
            if old != definition.source {
                state.bySource[old]?.remove(name)
                if state.bySource[old]?.isEmpty == true { state.bySource[old] = nil }
                state.bySource[definition.source, default: []].insert(name)
            }
            state.gates[name] = gate
            state.dispatches[old] = nil
            state.dispatches[definition.source] = nil
            state.generation += 1
        }
    }

    func remove(_ entry: ViewEntry, source: String) {
        state.withLock { state in
            guard state.views[entry.name] === entry else { return }
            state.views[entry.name] = nil
            state.gates[entry.name] = nil
            state.dispatches[source] = nil
            state.generation += 1
            state.bySource[source]?.remove(entry.name)
            if state.bySource[source]?.isEmpty == true { state.bySource[source] = nil }
        }
    }
}
