import Model

extension JournalRecord.Conditions {
    /// The request's conditions, to be checked when its record is applied. Weak tags are dropped from `If-Match`
    /// here, where it is strong comparison that counts (RFC 9110): nil when nothing is left of it, for the route to
    /// refuse at once. The check at apply time then compares as every journal written so far was applied.
    static func from(ifMatch: String?, ifNoneMatch: String?) -> JournalRecord.Conditions? {
        guard let ifMatch else { return .init(ifMatch: nil, ifNoneMatch: ifNoneMatch) }
        let strong = EntityTags(ifMatch).strongOnly
        guard let strong else { return nil }
        return .init(ifMatch: strong, ifNoneMatch: ifNoneMatch)
    }

    /// Throws unless `If-Match` (if any) names `version`, and `If-None-Match` (if any) does not; nil `version`
    /// when the collection (or view: `subject`) does not exist.
    func check(_ version: Version?, of subject: FeedSubjectKind = .collection) throws(Rejection) {
        if let ifMatch, !EntityTags(ifMatch).matches(version, weakly: true) {
            throw .preconditionFailed(
                PreconditionFailure(header: .ifMatch, value: ifMatch, current: version, subject: subject))
        }
        if let ifNoneMatch, EntityTags(ifNoneMatch).matches(version, weakly: true) {
            throw .preconditionFailed(
                PreconditionFailure(header: .ifNoneMatch, value: ifNoneMatch, current: version, subject: subject))
        }
    }
}
