/// The paging of `GET /v1/collections` and `GET /v1/views`: `limit=N` names per page, `after=NAME` the cursor
/// (the last name of the page before), and `next` in the answer while more remain.
extension App {
    /// Names listed in one page when the request names no `limit`, and the most it may ask for.
    static let defaultListLimit = 1000
    static let maximumListLimit = 10_000

    /// The page a list request asks for: names after `after`, at most `limit`.
    static func listPage(_ request: Request, of kind: FeedSubjectKind) throws(HTTPError) -> (
        after: String?, limit: Int
    ) {
        var limit = defaultListLimit
        if let raw = request.rawQuery("limit") {
            guard let number = percentDecoded(Substring(raw)).flatMap({ Int($0) }),
                (1...maximumListLimit).contains(number)
            else { throw .badLimit(raw) }
            limit = number
        }
        var after: String?
        if let raw = request.rawQuery("after") {
            guard let name = percentDecoded(Substring(raw)), Route.isValidCollectionName(name) else {
                throw .badCursor(raw, kind)
            }
            after = name
        }
        return (after, limit)
    }
}
