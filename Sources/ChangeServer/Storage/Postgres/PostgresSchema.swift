/// The tables in PostgreSQL and every statement the server runs on them.
///
/// - `changeserver_collections(name, last_seq)`: one row per collection name ever written, with the sequence of
///   its latest record. A transaction that appends records to a collection raises `last_seq` first, which takes
///   the row's lock until it commits: so the records of one collection commit in sequence order, whichever
///   server writes them.
/// - `changeserver_records(collection, seq, record)`: the journal, one row per record (the binary form of
///   `RecordCodec`); the primary key `(collection, seq)` forbids two records with one sequence.
/// - `changeserver_snapshots(collection, seq, content)`: the latest snapshot of a collection, the state after its
///   records up to `seq` (`content` NULL: the collection did not exist then); those records are deleted, but the
///   last 1,000 (for servers that have not read them yet); a deleted collection's go too, a while later.
/// - `changeserver_schema(version)`: the schema's version, checked at start.
enum PostgresSchema {
    static let version: Int64 = 1
    /// The channel of `NOTIFY`: a wake-up whose payload names collections and sequences, never records.
    static let channel = "changeserver"
    /// The advisory lock that serialises schema set-up among servers starting at once.
    private static let setupLock: Int64 = 0x4353_5347_0001

    /// Creates the tables when they are missing, in one transaction under an advisory lock, so that servers
    /// starting at the same moment do it once; refuses a schema newer than this server's.
    static func prepare(_ connection: PGConnection) throws(StartupError) {
        let current: Int64
        do throws(StorageError) {
            try connection.execute("BEGIN")
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(setupLock)])
            try connection.execute("CREATE TABLE IF NOT EXISTS changeserver_schema (version bigint PRIMARY KEY)")
            try connection.execute(
                "CREATE TABLE IF NOT EXISTS changeserver_collections (name text PRIMARY KEY, last_seq bigint NOT NULL)")
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS changeserver_records (collection text NOT NULL, seq bigint NOT NULL, \
                record bytea NOT NULL, PRIMARY KEY (collection, seq))
                """)
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS changeserver_snapshots (collection text PRIMARY KEY, \
                seq bigint NOT NULL, content bytea)
                """)
            try connection.execute(
                "INSERT INTO changeserver_schema (version) VALUES ($1) ON CONFLICT DO NOTHING", [.int64(version)])
            let found = try connection.execute("SELECT max(version) FROM changeserver_schema")
            try connection.execute("COMMIT")
            current = found.int64(0, 0)
        } catch {
            throw StartupError("cannot set up the schema in PostgreSQL: \(error)")
        }
        guard current == version else {
            throw StartupError("the database's schema is version \(current); this server knows version \(version) only")
        }
    }

    /// Appends `$3` (a `bytea[]` of `$2` records) to collection `$1` and returns the sequence of the last one:
    /// the records take `last_seq - $2 + 1 ... last_seq`.
    static let append = """
        WITH s AS (
            INSERT INTO changeserver_collections (name, last_seq) VALUES ($1, $2)
            ON CONFLICT (name) DO UPDATE SET last_seq = changeserver_collections.last_seq + $2
            RETURNING last_seq),
        i AS (
            INSERT INTO changeserver_records (collection, seq, record)
            SELECT $1, s.last_seq - $2 + r.ord, r.rec FROM s, unnest($3::bytea[]) WITH ORDINALITY AS r(rec, ord))
        SELECT last_seq FROM s
        """

    static let notify = "SELECT pg_notify($1, $2)"

    /// Records of collection `$1` after sequence `$2`, in order, at most `$3`.
    static let recordsAfter = """
        SELECT seq, record FROM changeserver_records WHERE collection = $1 AND seq > $2 ORDER BY seq LIMIT $3
        """

    static let lastSequences = "SELECT name, last_seq FROM changeserver_collections"

    static let snapshots = "SELECT collection, seq, content FROM changeserver_snapshots"

    /// The snapshot of collection `$1`, to start it anew when its records were compacted away.
    static let snapshot = "SELECT seq, content FROM changeserver_snapshots WHERE collection = $1"

    /// Records not covered by a snapshot, in `(collection, seq)` order after the key `($1, $2)`, at most `$3`.
    static let recordsToReplay = """
        SELECT r.collection, r.seq, r.record FROM changeserver_records r
        LEFT JOIN changeserver_snapshots s ON s.collection = r.collection
        WHERE r.seq > coalesce(s.seq, 0) AND (r.collection, r.seq) > ($1, $2)
        ORDER BY r.collection, r.seq LIMIT $3
        """

    /// Stores the snapshot of collection `$1` at sequence `$2` (content `$3`, NULL for none) unless a later one is
    /// there.
    static let saveSnapshot = """
        INSERT INTO changeserver_snapshots (collection, seq, content) VALUES ($1, $2, $3)
        ON CONFLICT (collection) DO UPDATE SET seq = excluded.seq, content = excluded.content
        WHERE changeserver_snapshots.seq < excluded.seq
        """

    /// Drops the records of collection `$1` that the snapshot at `$2` covers.
    static let compact = "DELETE FROM changeserver_records WHERE collection = $1 AND seq <= $2"

    /// Which of the collections `$1` (a `bytea[]` of UTF-8 names) still have records.
    static let namesWithRecords = """
        SELECT convert_from(n, 'UTF8') FROM unnest($1::bytea[]) AS n
        WHERE EXISTS (SELECT 1 FROM changeserver_records WHERE collection = convert_from(n, 'UTF8'))
        """

    /// Drops every record of collection `$1` up to `$2` when its stored snapshot covers them: a deleted
    /// collection's, which no record after will ever make worth keeping.
    static let purge = """
        DELETE FROM changeserver_records WHERE collection = $1 AND seq <= $2
        AND $2 <= (SELECT seq FROM changeserver_snapshots WHERE collection = $1)
        """
}
