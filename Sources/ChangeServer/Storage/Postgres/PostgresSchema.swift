/// The tables in PostgreSQL and every statement the server runs on them.
///
/// - `changeserver_collections(name, last_seq, left_collection, left_seq)`: one row per collection name ever
///   written, with the sequence of its latest record. A transaction that appends records to a collection raises
///   `last_seq` first, which takes the row's lock until it commits: so the records of one collection commit in
///   sequence order, whichever server writes them. A transaction that moves a view away from a collection takes
///   its row too, before any id (`lockCollection`), and notes there where its record is (`left_collection`,
///   `left_seq`): the records of the collection that follow are applied after it by every server.
/// - `changeserver_records(collection, seq, record, id)`: the journal, one row per record (the binary form of
///   `RecordCodec`); the primary key `(collection, seq)` forbids two records with one sequence. `id` (a
///   `bigserial`, unique) orders the records of all collections as every server applies them: it is taken while
///   the transaction holds its collection's row, so it follows `seq` within a collection, and for records committed
///   one after the other (a view's records under its successive sources) it follows the commits.
/// - `changeserver_snapshots(collection, seq, content, last_id)`: the latest snapshot of a collection, the state
///   after its records up to `seq` (`content` NULL: the collection did not exist then), whose last record has the
///   id `last_id`, where it stands among the records of other collections; those records are deleted, but the last
///   1,000 (for servers that have not read them yet); a deleted collection's go too, a while later.
/// - `changeserver_views(name, last_id, deleted, source, source_id, source_since)`: per view, the id of its latest
///   record and whether that record deleted it, written with the records; the collection that record is stored
///   under, the view's source after it, and the id of the record that brought the view there (`source_id` is the
///   id the source was noted for: a server of an earlier version, which notes no source, moves `last_id` alone, and
///   a source whose `source_id` is not `last_id` is unknown). A transaction takes its views' rows before any id
///   (`lockView`), so the records of one view take ids in the order they commit, and are noted in that order. A
///   snapshot of a view's earlier source may still hold a view that moved away or was deleted since: written after
///   the move by a server that had not read it yet. A starting server leaves a view out of the snapshots of other
///   collections that stand after it came to its noted source, and drops the views deleted here.
/// - `changeserver_schema(version)`: the schema's version, checked at start.
enum PostgresSchema {
    /// 2 since records have ids: a server of an earlier version, which would replay them in another order, refuses
    /// a database this one has started on (one running already goes on; its records get ids all the same).
    static let version: Int64 = 2
    /// The channel of `NOTIFY`: a wake-up whose payload names collections and sequences, never records.
    static let channel = "changeserver"
    /// The advisory lock that serialises schema set-up among servers starting at once.
    static let setupLock: Int64 = 0x4353_5347_0001

    /// Creates the tables when they are missing, in one transaction under an advisory lock, so that servers
    /// starting at the same moment do it once; refuses a schema newer than this server's before it changes
    /// anything (it added its own version, and any column it missed, to a database it would not serve). Returns the
    /// version the database had when this start raised it (servers of that version refuse it from now on).
    @discardableResult
    static func prepare(_ connection: PGConnection) throws(StartupError) -> Int64? {
        var current: Int64 = 0
        var before: Int64 = 0
        do throws(StorageError) {
            try connection.execute("BEGIN")
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(setupLock)])
            try connection.execute("CREATE TABLE IF NOT EXISTS changeserver_schema (version bigint PRIMARY KEY)")
            current = try connection.execute("SELECT coalesce(max(version), 0) FROM changeserver_schema").int64(0, 0)
            before = current
            if current > version {
                try connection.execute("ROLLBACK")
            } else {
                try createTables(connection)
                try connection.execute(
                    "INSERT INTO changeserver_schema (version) VALUES ($1) ON CONFLICT DO NOTHING", [.int64(version)])
                let found = try connection.execute("SELECT max(version) FROM changeserver_schema")
                try connection.execute("COMMIT")
                current = found.int64(0, 0)
            }
        } catch {
            throw StartupError("cannot set up the schema in PostgreSQL: \(error)")
        }
        guard current == version else { throw newer(current) }
        return before > 0 && before < version ? before : nil
    }

    /// Creates the tables and columns that are missing (within `prepare`'s transaction).
    private static func createTables(_ connection: PGConnection) throws(StorageError) {
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
            """
            CREATE TABLE IF NOT EXISTS changeserver_views (name text PRIMARY KEY, last_id bigint NOT NULL, \
            deleted boolean NOT NULL)
            """)
        // Altered only when a column is missing: an `ALTER TABLE` takes the table's exclusive lock, which
        // waits behind a starting server's reads and holds up every view record meanwhile.
        if try connection.execute(hasViewSources).int64(0, 0) < 3 {
            try connection.execute(
                "ALTER TABLE changeserver_views ADD COLUMN IF NOT EXISTS source text, "
                    + "ADD COLUMN IF NOT EXISTS source_id bigint, ADD COLUMN IF NOT EXISTS source_since bigint")
        }
        if try connection.execute(hasLeftMarks).int64(0, 0) < 2 {
            try connection.execute(
                "ALTER TABLE changeserver_collections ADD COLUMN IF NOT EXISTS left_collection text, "
                    + "ADD COLUMN IF NOT EXISTS left_seq bigint")
        }
        if try connection.execute(hasRecordIDs).int64(0, 0) == 0 {
            for statement in addRecordIDs { try connection.execute(statement) }
        }
    }

    private static func newer(_ current: Int64) -> StartupError {
        StartupError("the database's schema is version \(current); this server knows version \(version) only")
    }

    /// Whether the records have their `id` (1) or not (0: a new database, or one that servers wrote before ids).
    private static let hasRecordIDs = """
        SELECT count(*) FROM pg_attribute
        WHERE attrelid = 'changeserver_records'::regclass AND attname = 'id' AND NOT attisdropped
        """

    /// How many of the columns that note a view's source `changeserver_views` has (3 when it has them all).
    private static let hasViewSources = """
        SELECT count(*) FROM pg_attribute
        WHERE attrelid = 'changeserver_views'::regclass AND attname IN ('source', 'source_id', 'source_since')
            AND NOT attisdropped
        """

    /// How many of the columns that note the latest move away from a collection (`markLeft`)
    /// `changeserver_collections` has (2 when it has both).
    private static let hasLeftMarks = """
        SELECT count(*) FROM pg_attribute
        WHERE attrelid = 'changeserver_collections'::regclass AND attname IN ('left_collection', 'left_seq')
            AND NOT attisdropped
        """

    /// Gives every record an id, in place, in the order servers started from before ids: first the records a
    /// snapshot covers, then the others in `(collection, seq)` order; so every snapshot stands before every record
    /// it does not cover, as it was restored before them, and a restart shows what it showed before. New records
    /// take the next. Snapshots stand at the id of their last record (0 when it was purged).
    private static let addRecordIDs = [
        "ALTER TABLE changeserver_records ADD COLUMN id bigserial",
        """
        UPDATE changeserver_records r SET id = o.n
        FROM (
            SELECT r2.collection, r2.seq,
                row_number() OVER (ORDER BY r2.seq > coalesce(s.seq, 0), r2.collection, r2.seq) AS n
            FROM changeserver_records r2 LEFT JOIN changeserver_snapshots s ON s.collection = r2.collection) o
        WHERE r.collection = o.collection AND r.seq = o.seq
        """,
        "CREATE UNIQUE INDEX changeserver_records_id ON changeserver_records (id)",
        "ALTER TABLE changeserver_snapshots ADD COLUMN IF NOT EXISTS last_id bigint",
    ]

    /// Appends `$3` (a `bytea[]` of `$2` records) to collection `$1` and returns the sequence of the last one
    /// (the records take `last_seq - $2 + 1 ... last_seq`), and where the latest record that moved a view away from
    /// the collection is (`markLeft`; NULL when none did): as the row holds it once its lock is taken, so after
    /// any such move that committed first.
    static let append = """
        WITH s AS (
            INSERT INTO changeserver_collections (name, last_seq) VALUES ($1, $2)
            ON CONFLICT (name) DO UPDATE SET last_seq = changeserver_collections.last_seq + $2
            RETURNING last_seq, left_collection, left_seq),
        i AS (
            INSERT INTO changeserver_records (collection, seq, record)
            SELECT $1, s.last_seq - $2 + r.ord, r.rec FROM s, unnest($3::bytea[]) WITH ORDINALITY AS r(rec, ord))
        SELECT last_seq, left_collection, left_seq FROM s
        """

    static let notify = "SELECT pg_notify($1, $2)"

    /// The writer's trial while commits fail (`PostgresJournal.tryWriting`): a row no record has, deleted in the same
    /// transaction.
    static let trialInsert = "INSERT INTO changeserver_records (collection, seq, record) VALUES ('', -1, '\\x00')"
    static let trialDelete = "DELETE FROM changeserver_records WHERE collection = '' AND seq = -1"

    /// Takes the row of collection `$1` (inserting it, `last_seq` 0, when missing) until the transaction ends, and
    /// returns its `last_seq`. A transaction that moves a view takes the row of the source the view leaves, with
    /// those of its own collections, in name order before any id: a write to that source then either committed
    /// before the move and took a lower id, or commits after it with a higher one. (Without it, a write that took
    /// its id before the move and committed after it was applied before the move by some servers, after it by
    /// others, and the view's versions drifted apart.)
    static let lockCollection = """
        INSERT INTO changeserver_collections (name, last_seq) VALUES ($1, 0)
        ON CONFLICT (name) DO UPDATE SET last_seq = changeserver_collections.last_seq
        RETURNING last_seq
        """

    /// Notes that record `$3` of collection `$2` is the latest to move a view away from collection `$1` (whose row
    /// the transaction holds): a server must have applied it before it applies the records of `$1` that follow it.
    static let markLeft = "UPDATE changeserver_collections SET left_collection = $2, left_seq = $3 WHERE name = $1"

    /// For each collection of `$1` (a `bytea[]` of UTF-8 names) that a view left: the collection and sequence of
    /// the latest record that moved a view away from it (`markLeft`; compared in the column's collation, as in
    /// `recordsOfAfter`).
    static let collectionsLeft = """
        SELECT c.left_collection, c.left_seq FROM unnest($1::bytea[]) AS n
        JOIN changeserver_collections c ON c.name = convert_from(n, 'UTF8') COLLATE "default"
        WHERE c.left_seq IS NOT NULL
        """

    /// Takes the row of view `$1` (inserting a placeholder, `last_id` 0, for a new name) until the transaction ends,
    /// before the records take their ids: so the records of one view take ids in the order their transactions
    /// commit, whichever collections they are stored under, and their notes are written in that order. Returns the
    /// view's noted source (NULL when unknown: `source`'s rules), and the collection and sequence of its latest
    /// record (NULL when there is none, or it was compacted away). Taken in the order of the views' names, before
    /// any collection's row, by every server.
    static let lockView = """
        WITH locked AS (
            INSERT INTO changeserver_views AS v (name, last_id, deleted) VALUES ($1, 0, false)
            ON CONFLICT (name) DO UPDATE SET name = v.name
            RETURNING v.source, v.source_id, v.last_id)
        SELECT CASE WHEN locked.source_id = locked.last_id THEN locked.source END, r.collection, r.seq
        FROM locked LEFT JOIN changeserver_records r ON r.id = locked.last_id
        """

    /// Notes that record `$3` of collection `$2` is the latest of view `$1`, whether it deletes it, and that `$2` is
    /// the view's source after it, since that record or since the one that brought it there (`RecordCodec.ViewNote`
    /// `$4`: 1 deletes, 0 defines, 2 may be refused, which leaves `deleted` as it was, and the source too when it is
    /// `$2`, or else makes it unknown), unless a record of a higher id is noted.
    static let noteView = """
        INSERT INTO changeserver_views AS v (name, last_id, deleted, source, source_id, source_since)
        SELECT $1, id, $4 = 1, CASE WHEN $4 = 2 THEN NULL ELSE $2 END, id, id
        FROM changeserver_records WHERE collection = $2 AND seq = $3
        ON CONFLICT (name) DO UPDATE SET last_id = excluded.last_id,
            deleted = CASE WHEN $4 = 2 THEN v.deleted ELSE excluded.deleted END,
            source = CASE WHEN $4 <> 2 OR (v.source = $2 AND v.source_id = v.last_id) THEN $2 END,
            source_id = excluded.last_id,
            source_since = CASE WHEN v.source = $2 AND v.source_id = v.last_id
                THEN coalesce(v.source_since, excluded.last_id) ELSE excluded.last_id END
        WHERE v.last_id < excluded.last_id
        """

    /// The views whose latest noted record deleted them, with its id.
    static let deletedViews = "SELECT name, last_id FROM changeserver_views WHERE deleted"

    /// The views whose source after their latest record is known: `(name, source, id of the record that brought
    /// the view there)`. (A row noted before `source_since` was has none, and is taken for unknown: a later record
    /// on the same source notes itself, later than the truth, which leaves out fewer stale copies, never a good
    /// one.)
    static let viewSources = """
        SELECT name, source, source_since FROM changeserver_views
        WHERE source IS NOT NULL AND source_id = last_id AND source_since IS NOT NULL
        """

    /// Records of collection `$1` after sequence `$2`, in order, at most `$3`.
    static let recordsAfter = """
        SELECT seq, record FROM changeserver_records WHERE collection = $1 AND seq > $2 ORDER BY seq LIMIT $3
        """

    /// Record bytes a page read by the follower or a starting server holds at most, but for its first record: a
    /// page of 1,000 records of a collection replaced back to back (10 MB each) would otherwise take 10 GB at once.
    static let pageBytes = 32 << 20

    /// Records of the collections `$1` (a `bytea[]` of UTF-8 names), each after its sequence in `$2` (a
    /// `bigint[]`), at most `$3` of each, and at most `$3` in all: `(collection, seq, record, id)` in id order, cut
    /// after the record that reaches `$4` bytes of records. Rows left out of a full answer (`$3` rows, or `$4`
    /// bytes) all have ids above those in it. The names are compared in the column's collation (`convert_from`
    /// gives that of its `name` argument, "C"), so that the `(collection, seq)` index serves. The bytes are counted
    /// over the page the count limit gives (sorted keeping only its `$3` rows), and `octet_length` reads a stored
    /// record's length without reading the record.
    static let recordsOfAfter = """
        SELECT collection, seq, record, id FROM (
            SELECT *, sum(octet_length(record)) OVER (ORDER BY id) - octet_length(record) AS before FROM (
                SELECT r.collection, r.seq, r.record, r.id FROM unnest($1::bytea[], $2::bigint[]) AS a(name, after)
                CROSS JOIN LATERAL (
                    SELECT collection, seq, record, id FROM changeserver_records
                    WHERE collection = convert_from(a.name, 'UTF8') COLLATE "default" AND seq > a.after
                    ORDER BY seq LIMIT $3) r
                ORDER BY r.id LIMIT $3) page) counted
        WHERE before < $4 ORDER BY id
        """

    static let lastSequences = "SELECT name, last_seq FROM changeserver_collections"

    /// Every snapshot, `(collection, seq, content, position)`, in the order of their positions: the id of the last
    /// record each covers (the stored one when that record was purged; 0 when neither is known).
    static let snapshots = """
        SELECT s.collection, s.seq, s.content, coalesce(r.id, s.last_id, 0) AS position FROM changeserver_snapshots s
        LEFT JOIN changeserver_records r ON r.collection = s.collection AND r.seq = s.seq
        ORDER BY position, s.collection
        """

    /// Records not covered by a snapshot, `(collection, seq, record, id)` in id order after id `$1`, at most `$2`,
    /// cut after the record that reaches `$3` bytes of records (as `recordsOfAfter`).
    static let recordsToReplay = """
        SELECT collection, seq, record, id FROM (
            SELECT *, sum(octet_length(record)) OVER (ORDER BY id) - octet_length(record) AS before FROM (
                SELECT r.collection, r.seq, r.record, r.id FROM changeserver_records r
                LEFT JOIN changeserver_snapshots s ON s.collection = r.collection
                WHERE r.seq > coalesce(s.seq, 0) AND r.id > $1
                ORDER BY r.id LIMIT $2) page) counted
        WHERE before < $3 ORDER BY id
        """

    /// Stores the snapshot of collection `$1` at sequence `$2` (content `$3`, NULL for none), with the id of that
    /// record, unless a later one is there.
    static let saveSnapshot = """
        INSERT INTO changeserver_snapshots (collection, seq, content, last_id)
        VALUES ($1, $2, $3, (SELECT id FROM changeserver_records WHERE collection = $1 AND seq = $2))
        ON CONFLICT (collection) DO UPDATE SET seq = excluded.seq, content = excluded.content, last_id = excluded.last_id
        WHERE changeserver_snapshots.seq < excluded.seq
        """

    /// Drops the records of collection `$1` that the snapshot at `$2` covers.
    static let compact = "DELETE FROM changeserver_records WHERE collection = $1 AND seq <= $2"

    /// Which of the collections `$1` (a `bytea[]` of UTF-8 names) still have records (compared in the column's
    /// collation, as in `recordsOfAfter`).
    static let namesWithRecords = """
        SELECT convert_from(n, 'UTF8') FROM unnest($1::bytea[]) AS n
        WHERE EXISTS (
            SELECT 1 FROM changeserver_records WHERE collection = convert_from(n, 'UTF8') COLLATE "default")
        """

    /// Drops every record of collection `$1` up to `$2` when its stored snapshot covers them: a deleted
    /// collection's, which no record after will ever make worth keeping.
    static let purge = """
        DELETE FROM changeserver_records WHERE collection = $1 AND seq <= $2
        AND $2 <= (SELECT seq FROM changeserver_snapshots WHERE collection = $1)
        """
}
