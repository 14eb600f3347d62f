#if canImport(UIKit)
    import UIKit
#elseif canImport(AppKit)
    import AppKit
#endif

#if canImport(UIKit) || canImport(AppKit)
    extension CollectionUpdate.Identifiers {
        /// The ids as a diffable data source snapshot: sections by id, items by id.
        public func diffableSnapshot() -> NSDiffableDataSourceSnapshot<String, String> {
            var snapshot = NSDiffableDataSourceSnapshot<String, String>()
            let sectionIDs = self.sectionIDs
            snapshot.appendSections(sectionIDs)
            for (index, id) in sectionIDs.enumerated() {
                snapshot.appendItems(itemIDs(inSection: index), toSection: id)
            }
            return snapshot
        }
    }
#endif
