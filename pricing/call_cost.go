package pricing

// Cost is what a call, or one attempt of it, cost as far as it is known: the amount, and
// how sure it is. llmclient puts one on every Response, Attempt, Event and Error.
//
// The zero Cost is unknown: no price was configured or found for the model, so nothing
// can be said, which is not the same as $0. A known Cost of 0 is a free call: a
// self-hosted model priced at zero, an attempt refused locally before any call, or an
// error response, which vendors do not bill.
//
// Estimated marks an amount computed from token counts the Client estimated itself,
// because the upstream reported no usage: a stream cut before its usage arrived, or an
// attempt that timed out after the request was sent (the upstream may have generated the
// whole answer, and bills it: the estimate is then the prompt plus the largest output the
// request allowed).
//
// Cost is a small value, safe to copy and to share between goroutines.
type Cost struct {
	// Amount is the cost. When Known is false it holds the sum of the parts that are
	// known (0 when none is).
	Amount Money
	// Known reports whether Amount is the whole cost: every part of it was priced.
	Known bool
	// Estimated reports that some part of Amount comes from estimated token counts.
	Estimated bool
	// Model is the price that was applied, for a single attempt; nil for a sum over
	// several attempts that used different prices, and for an unknown cost.
	Model *Model
}

// Plus returns the cost of c and d together: the amounts added (saturating at MaxMoney),
// known only when both are, estimated when either is. Model is kept when both name the
// same one, or when one of them is a known $0 without a model (a local refusal).
func (c Cost) Plus(d Cost) Cost {
	out := Cost{
		Amount:    addCost(max(c.Amount, 0), max(d.Amount, 0)),
		Known:     c.Known && d.Known,
		Estimated: c.Estimated || d.Estimated,
	}
	switch {
	case c.Model == d.Model:
		out.Model = c.Model
	case d.Model == nil && d.Known && d.Amount == 0:
		out.Model = c.Model
	case c.Model == nil && c.Known && c.Amount == 0:
		out.Model = d.Model
	}
	if !out.Known {
		out.Model = nil
	}
	return out
}

// String formats the cost: "$0.0123", "~$0.0123" when estimated, "unknown" when nothing
// is known, and "≥$0.0123" for a partly known sum.
func (c Cost) String() string {
	switch {
	case !c.Known && c.Amount == 0:
		return "unknown"
	case !c.Known:
		return "≥" + c.Amount.String()
	case c.Estimated:
		return "~" + c.Amount.String()
	}
	return c.Amount.String()
}
