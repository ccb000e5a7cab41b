package llmclient

// WithStreamContinuation sets whether Client.Stream continues a committed stream that
// breaks — cut, stalled past its idle timeout, or ended by an in-band error — on its
// route, so that the caller's Stream goes on from where it stopped. Default true.
func WithStreamContinuation(on bool) Option {
	return optionFunc(func(c *config) { c.stream.continuation = on })
}
