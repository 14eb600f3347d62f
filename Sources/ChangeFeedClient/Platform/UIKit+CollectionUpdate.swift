#if canImport(UIKit)
    import UIKit

    extension UICollectionView {
        /// Shows `update`: a reload for a `.reload`; else ONE `performBatchUpdates` with its sections and items,
        /// then `reconfigureItems` for the items whose data changed. Section data (`reloadedSections`) is the
        /// app's to show in its headers.
        public func apply(_ update: CollectionUpdate, completion: ((Bool) -> Void)? = nil) {
            guard update.kind == .batch else {
                reloadData()
                completion?(true)
                return
            }
            performBatchUpdates(
                {
                    self.deleteSections(update.deletedSections)
                    self.insertSections(update.insertedSections)
                    for move in update.movedSections { self.moveSection(move.from, toSection: move.to) }
                    self.deleteItems(at: update.deletedItems)
                    self.insertItems(at: update.insertedItems)
                    for move in update.movedItems { self.moveItem(at: move.from, to: move.to) }
                }, completion: completion)
            if !update.reconfiguredItems.isEmpty { reconfigureItems(at: update.reconfiguredItems) }
        }
    }

    extension UICollectionViewDiffableDataSource where SectionIdentifierType == String, ItemIdentifierType == String {
        /// Applies the mirror's ids after `update`, with its changed items reconfigured; animated for a batch. A
        /// reset is applied as a reload: items whose ids it keeps may have new data, and since iOS 15 applying a
        /// snapshot without animation diffs the ids rather than reloading.
        public func apply(_ update: CollectionUpdate, animatingDifferences: Bool = true) {
            var snapshot = update.identifiers.diffableSnapshot()
            guard update.kind == .batch else { return applySnapshotUsingReloadData(snapshot) }
            snapshot.reconfigureItems(update.reconfiguredItemIDs)
            apply(snapshot, animatingDifferences: animatingDifferences)
        }
    }
#endif
