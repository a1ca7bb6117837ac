package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// DefaultMaxEventStreams is Config.MaxEventStreams' default.
const DefaultMaxEventStreams = 1000

// eventSource is what a node's event hub reads: the store's published views
// and the read server's publish notifications.
type eventSource struct {
	store *disk.Store
	reads *query.Server
}

func (s eventSource) PublishedView() (*disk.View, error) { return s.store.PublishedView() }
func (s eventSource) Published() query.Published         { return s.reads.Published() }
func (s eventSource) WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (query.Published, error) {
	return s.reads.WaitFor(ctx, minSeq, minHeight, maxWait)
}

// newEventHub starts the event streams of a store (nil when the store keeps
// no change log: the streams then answer 503): the address, and each index
// dimension the store keeps.
// The hub is subscribed to w: it records when each change is published,
// what its streams' delivery time is measured from.
func newEventHub(store *disk.Store, reads *query.Server, w *writer.Writer, reg prometheus.Registerer, maxStreams int, lim chain.Limits, log *slog.Logger) (*events.Hub, error) {
	if store.Options().LogRetention == 0 {
		return nil, nil
	}
	dims := map[disk.Dimension]disk.ValuesFunc{}
	for _, d := range []disk.Dimension{disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset, disk.DimScriptHash} {
		if store.Indexes(d) {
			dims[d] = disk.ValuesOf(d, IndexDerivers())
		}
	}
	hub, err := events.New(eventSource{store, reads}, events.Options{MaxStreams: maxStreams, Dimensions: dims, BlockLimits: lim,
		Metrics: events.NewMetrics(reg), Logger: log})
	if err != nil {
		return nil, err
	}
	w.Subscribe(publishClock{hub})
	return hub, nil
}

// publishClock tells a hub when each change is published: on the writer's
// goroutine, just before the store publishes it (Changed). Marked after the
// publish instead, the hub's dispatcher, woken by the reads' own publish
// listener, could deliver the change's events before the mark on a busy
// CPU, and their delivery would go uncounted.
type publishClock struct{ hub *events.Hub }

func (p publishClock) Changed(cs *changeset.Set) {
	p.hub.MarkPublished(cs.Seq, time.Now())
}

// eventsOption is hub as the API's Events: a nil interface when there is no
// hub.
func eventsOption(hub *events.Hub) api.Events {
	if hub == nil {
		return nil
	}
	return hub
}
