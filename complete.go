package llmclient

import "context"

// complete is the one-shot call path.
func (c *Client) complete(ctx context.Context, req *Request) (*Response, error) {
	r := runPool.Get().(*run)
	defer r.finish() // a panicking hook leaves nothing held
	route, pol := c.routeOf(req)
	if err := c.begin(ctx, r, req, route, pol, c.completeChain, false); err != nil {
		return nil, err
	}
	a, err := r.exec(ctx)
	if err != nil {
		r.releasePartition(nil)
		r.detachTrace()
		resp, err := r.fail(ctx, err)
		r.ended(resp, err, nil)
		return resp, err
	}
	r.detachTrace()
	resp := r.succeed(a, a.resp)
	if resp.RateLimits == nil {
		a.unreported()
	}
	r.called(resp, nil, nil)
	return resp, nil
}

// routeOf is the route of a typed request and its policy; a nil request has none (begin
// refuses it).
func (c *Client) routeOf(req *Request) ([]*upstream, *routePolicy) {
	if req == nil {
		return nil, nil
	}
	return c.routeWith(req.Model)
}
