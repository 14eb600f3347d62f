import Model

/// When a write of `ChangeServerClient` is to be taken (`If-Match` and `If-None-Match`, compared with the
/// collection's or view's version: the contract's conditions are on the whole collection, not on one item).
/// A write whose condition fails is refused with `412 precondition_failed`, and changes nothing.
public enum WriteCondition: Hashable, Sendable {
    /// Always (no condition).
    case always
    /// Only if the collection (or view) is still at this version, the one the app last read or mirrors
    /// (`LiveCollection.version`): no one else wrote in between. `If-Match: "<version>"`.
    case at(Version)
    /// Only if the collection (or view) does not exist: creates, never replaces. `If-None-Match: *`.
    case absent
    /// Only if the collection (or view) exists. `If-Match: *`.
    case exists

    /// The header it is sent as.
    var header: (name: String, value: String)? {
        switch self {
        case .always: nil
        case .at(let version): ("If-Match", "\"\(version)\"")
        case .absent: ("If-None-Match", "*")
        case .exists: ("If-Match", "*")
        }
    }
}
