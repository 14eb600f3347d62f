import ChangeFeedClient
import Foundation
import Model

/// Follows a collection or view from the command line: prints each event, keeps a `LiveCollection`, and after
/// each event checks the mirror against a fresh snapshot (fetched through the feed itself) when that snapshot is
/// at the mirror's version.
///
///     swift run FeedFollower http://127.0.0.1:8080 inbox [more names] [--view] [--token T] [--count N]
///
/// With several names it follows each at once, each line led by its name; `--view` makes every name a view's.
/// `--count N` stops once each name has had N events (a `missing` is one: a name that stays missing has no more).
@main
struct FeedFollower {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
            defer { arguments.removeSubrange(index...(index + 1)) }
            return arguments[index + 1]
        }
        let token = option("--token")
        let count = option("--count").flatMap { Int($0) }
        let kind: FeedClient.Kind = arguments.contains("--view") ? .view : .collection
        arguments.removeAll { $0 == "--view" }
        guard arguments.count >= 2, let baseURL = URL(string: arguments[0]) else {
            say("usage: FeedFollower BASE_URL NAME [NAME...] [--view] [--token T] [--count N]")
            exit(2)
        }
        let names = arguments.dropFirst()
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                let client = FeedClient(baseURL: baseURL, name: name, kind: kind, token: token)
                let lead = names.count > 1 ? "\(name): " : ""
                group.addTask {
                    do {
                        try await follow(client, count: count) { say(lead + $0) }
                    } catch {
                        say("\(lead)stopped: \(error)")
                        exit(1)
                    }
                }
            }
        }
    }

    static func follow(_ client: FeedClient, count: Int?, print: (String) -> Void) async throws {
        var live = LiveCollection()
        var seen = 0
        for try await event in client.events() {
            let update = try live.apply(event)
            switch event {
            case .reset(let snapshot):
                let items = snapshot.sections.reduce(0) { $0 + $1.items.count }
                print("reset to \(snapshot.version): \(snapshot.sections.count) sections, \(items) items")
            case .changes(let changeset):
                print(
                    "\(changeset.from) -> \(changeset.to): sections -\(update.deletedSections.count) "
                        + "+\(update.insertedSections.count) ~\(update.movedSections.count); items "
                        + "-\(update.deletedItems.count) +\(update.insertedItems.count) ~\(update.movedItems.count) "
                        + "reconfigure \(update.reconfiguredItems.count)")
            case .missing:
                print("missing: no such \(client.kind.rawValue) now; waiting for it to be created")
            }
            if let snapshot = try await freshSnapshot(client), snapshot.version == live.version {
                guard snapshot.sections == live.sections else {
                    print("MISMATCH: the mirror differs from the snapshot at \(snapshot.version)")
                    exit(1)
                }
                print("mirror matches the snapshot at \(snapshot.version)")
            }
            seen += 1
            if let count, seen >= count { return }
        }
    }

    /// Writes a line at once, also into a pipe (`| tee`), where `print` keeps a block before writing it.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// A fresh snapshot, from a reset of the feed.
    static func freshSnapshot(_ client: FeedClient) async throws -> Snapshot? {
        var events = client.events().makeAsyncIterator()
        guard case .reset(let snapshot) = try await events.next() else { return nil }
        return snapshot
    }
}
