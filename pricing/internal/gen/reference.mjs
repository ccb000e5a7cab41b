// reference.mjs writes testdata/reference.csv: prices computed by the data's own engine,
// the npm package @pydantic/genai-prices 0.1.8, for the pricing package's differential test
// (reference_test.go). Not run by CI; regenerate after updating the snapshot:
//
//	npm pack @pydantic/genai-prices@0.1.8 && tar xzf pydantic-genai-prices-0.1.8.tgz
//	node pricing/internal/gen/reference.mjs package/dist/index.js \
//	    /path/to/providers.json > pricing/testdata/reference.csv
//
// Each line: provider given, model name given, usage index, time index, then the provider
// and model the engine found and its total price in USD, or "-" when it found none. The
// usages and times are listed in reference_test.go in the same order.
import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [engine, data] = process.argv.slice(2)
const { calcPrice, updatePrices, waitForUpdate } = await import(pathToFileURL(path.resolve(engine)).href)
const providers = JSON.parse(fs.readFileSync(data, 'utf8'))
updatePrices(({ setProviderData }) => setProviderData(providers))
await waitForUpdate()

const usages = [
  { input_tokens: 1500, output_tokens: 500 },
  { input_tokens: 250000, cache_read_tokens: 50000, cache_write_tokens: 10000, output_tokens: 3000, output_reasoning_tokens: 1000 },
  { input_tokens: 200000, output_tokens: 10 },
  { input_tokens: 200001, cache_read_tokens: 1, output_tokens: 10 },
  { input_tokens: 272000, cache_write_tokens: 100, output_tokens: 7 },
]
const times = ['2025-01-01T00:29:59Z', '2025-06-10T00:30:00Z', '2026-08-17T02:00:00Z', '2026-09-01T05:00:00Z', '2027-03-01T16:30:00Z']

const names = []
let i = 0
for (const p of providers) {
  for (const m of p.models) {
    names.push([p.id, m.id])
    // Variants on a sample: no provider, upper case, a date without dashes.
    if (i % 5 === 0) names.push(['', m.id])
    if (i % 5 === 1) names.push([p.id, m.id.toUpperCase()])
    const compact = m.id.replace(/-(\d{4})-(\d{2})-(\d{2})/, '-$1$2$3')
    if (compact !== m.id) names.push([p.id, compact])
    i++
  }
}
names.push(
  ['litellm', 'anthropic/claude-3-5-sonnet-20241022'], ['litellm', 'gpt-4o'], ['gemini', 'gemini-2.5-flash'],
  ['vertex', 'claude-sonnet-4-5@20250929'], ['bedrock', 'anthropic.claude-3-haiku-20240307-v1:0'],
  ['azure', 'claude-opus-4-1'], ['xai', 'grok-4'], ['', 'mistral-large-latest'], ['', 'mistralai/mistral-large'],
  ['google', 'gemini-2.5-pro-preview-tts'], ['', 'llama-3.3-70b'], ['nosuchprovider', 'gpt-4o'],
)

const csv = (s) => (/[",\n]/.test(s) ? '"' + s.replaceAll('"', '""') + '"' : s)
let n = 0
for (const [prov, name] of names) {
  const ui = n % usages.length
  const ti = Math.floor(n / usages.length) % times.length
  n++
  const r = calcPrice(usages[ui], name, { providerId: prov || undefined, timestamp: new Date(times[ti]) })
  const found = r ? [r.provider.id, r.model.id, String(r.total_price)] : ['-', '-', '-']
  console.log([prov, name, ui, ti, ...found].map((v) => csv(String(v))).join(','))
}
