package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Freezer is the writer's side of frozen outputs (writer.Writer); a Writer
// that is not one answers the freeze routes 403 read_only.
type Freezer interface {
	Freeze(ctx context.Context, f chain.Freeze) (writer.Result, error)
	Unfreeze(ctx context.Context, f chain.Freeze) (writer.Result, error)
}

// postFrozen answers POST /v1/frozen: {"outpoints": [...], "reason": "…"}
// with the admin token, one change of the commit sequence →
// {"frozen": n, "seq": S}, n the outpoints whose freeze the change set
// (0, and the current seq, when each was frozen already for that reason).
func (a *API) postFrozen(c *gin.Context) { a.setFrozen(c, true) }

// deleteFrozen answers DELETE /v1/frozen: {"outpoints": [...]} →
// {"unfrozen": n, "seq": S}; outpoints that are not frozen are left alone.
func (a *API) deleteFrozen(c *gin.Context) { a.setFrozen(c, false) }

func (a *API) setFrozen(c *gin.Context, freeze bool) {
	if err := a.authorize(c); err != nil {
		a.fail(c, err)
		return
	}
	fz, ok := a.w.(Freezer)
	if !ok {
		a.fail(c, errReadOnly)
		return
	}
	body, err := a.readJSONBody(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	f, err := chain.DecodeFreezeJSON(body, freeze)
	if err != nil {
		a.fail(c, err)
		return
	}
	var res writer.Result
	member := `{"frozen":`
	if freeze {
		res, err = fz.Freeze(c.Request.Context(), f)
	} else {
		member = `{"unfrozen":`
		res, err = fz.Unfreeze(c.Request.Context(), f)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	n := 0
	if res.Changes != nil {
		n = len(res.Changes.OutPoints)
	}
	out := strconv.AppendInt([]byte(member), int64(n), 10)
	out = append(out, `,"tip":`...)
	out = query.AppendTip(out, res.Tip)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}
