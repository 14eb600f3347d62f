#if canImport(AppKit) && !targetEnvironment(macCatalyst)
    import AppKit

    extension NSCollectionView {
        /// Shows `update`: a reload for a `.reload`; else ONE `performBatchUpdates` with its sections and items,
        /// then `reloadItems` for the items whose data changed.
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
                    self.deleteItems(at: Set(update.deletedItems))
                    self.insertItems(at: Set(update.insertedItems))
                    for move in update.movedItems { self.moveItem(at: move.from, to: move.to) }
                }, completionHandler: completion)
            if !update.reconfiguredItems.isEmpty { reloadItems(at: Set(update.reconfiguredItems)) }
        }
    }

    extension NSCollectionViewDiffableDataSource where SectionIdentifierType == String, ItemIdentifierType == String {
        /// Applies the mirror's ids after `update`, with its changed items reloaded; animated for a batch. After a
        /// reset every item is reloaded: items whose ids it keeps may have new data, which a diff of ids misses.
        public func apply(_ update: CollectionUpdate, animatingDifferences: Bool = true) {
            var snapshot = update.identifiers.diffableSnapshot()
            snapshot.reloadItems(update.kind == .batch ? update.reconfiguredItemIDs : snapshot.itemIdentifiers)
            apply(snapshot, animatingDifferences: animatingDifferences && update.kind == .batch)
        }
    }
#endif
