package disk

// Health is a snapshot of the store's figures for metrics and stats. Every
// field is filled by Health (TestHealthFieldsAreFilled): a field nobody sets
// reads as a real zero to its consumers.
type Health struct {
	DiskBytes          uint64 // total on-disk size of the store
	ReadAmplification  int    // sublevels a point read may visit
	L0Files            int64
	CompactionDebt     uint64 // bytes Pebble estimates it must compact to bring the LSM into shape
	CompactionsRunning int64  // compactions in progress
	Compactions        int64
	Flushes            int64
	MemTableBytes      uint64
	MemTables          int64 // memtables, the mutable one and those queued for flushing
	Sstables           int64 // live sstables, every level
	ZombieSstables     int64 // sstables no longer in the tree but held by an iterator
	OpenSstables       int64 // sstables the file cache holds open (file descriptors)
	TableIterators     int64 // open sstable iterators
	Snapshots          int   // open Pebble snapshots (published states hold one each)
	BlockCacheBytes    int64 // bytes in the block cache (bounded by Options.CacheBytes)
	BlockCacheHits     int64
	BlockCacheMisses   int64
	RecentHits         uint64 // apply lookups answered by the young-output view
	RecentMisses       uint64
	FilterSkips        uint64 // lookups the tx-hash filter answered "absent" without a read
	FilterRebuilds     uint64 // background rebuilds of the tx-hash filter swapped in
	PrunedSpentRecords uint64 // spent records deleted since open
	PrunedUndoDeltas   uint64 // undo deltas deleted since open
	BackgroundErrors   uint64 // failed flushes and compactions (Pebble retries them) since open
}

// Health returns the store's current figures. Safe from any goroutine.
func (s *Store) Health() Health {
	m := s.db.Metrics()
	return Health{
		DiskBytes:          m.DiskSpaceUsage(),
		ReadAmplification:  m.ReadAmp(),
		L0Files:            m.Levels[0].TablesCount,
		CompactionDebt:     m.Compact.EstimatedDebt,
		CompactionsRunning: m.Compact.NumInProgress,
		Compactions:        m.Compact.Count,
		Flushes:            m.Flush.Count,
		MemTableBytes:      m.MemTable.Size,
		MemTables:          m.MemTable.Count,
		Sstables:           m.Total().TablesCount,
		ZombieSstables:     m.Table.ZombieCount,
		OpenSstables:       m.FileCache.TableCount,
		TableIterators:     m.TableIters,
		Snapshots:          m.Snapshots.Count,
		BlockCacheBytes:    m.BlockCache.Size,
		BlockCacheHits:     m.BlockCache.Hits,
		BlockCacheMisses:   m.BlockCache.Misses,
		RecentHits:         s.metrics.recentHits.Load(),
		RecentMisses:       s.metrics.recentMisses.Load(),
		FilterSkips:        s.metrics.filterSkips.Load(),
		FilterRebuilds:     s.metrics.filterRebuilds.Load(),
		PrunedSpentRecords: s.metrics.prunedRecords.Load(),
		PrunedUndoDeltas:   s.metrics.prunedUndo.Load(),
		BackgroundErrors:   s.bgErrors.total.Load(),
	}
}
