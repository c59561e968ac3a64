// The official TypeScript SDK client (npm @modelcontextprotocol/sdk 1.x) against a stdio
// server: lists its tools, makes each call given, and prints what the client handed back,
// or the error it threw, as one JSON line per call. Run by tests/mcp/test_mcp_serve_ts.py.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const sdk = process.env.AGTOOL_TS_SDK;
const load = (path) => import(pathToFileURL(join(sdk, "dist", "esm", path)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const [command, ...args] = JSON.parse(process.env.AGTOOL_TS_SERVER);
const calls = JSON.parse(process.env.AGTOOL_TS_CALLS);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" });
const client = new Client({ name: "agtool-ts-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();  // the client keeps each tool's outputSchema
console.log(JSON.stringify({ listed: tools.map((tool) => tool.name) }));
for (const [name, argumentsGiven] of calls) {
  try {
    const result = await client.callTool({ name, arguments: argumentsGiven });
    console.log(JSON.stringify({ result }));
  } catch (error) {
    console.log(JSON.stringify({ thrown: { code: error.code ?? null, message: String(error.message) } }));
  }
}
await client.close();
