// The MCP SDK's declarations name `HeadersInit`, a DOM global that Node's types keep in
// undici-types; this check compiles without the DOM library (it clashes with Node's streams).
type HeadersInit = import('undici-types').HeadersInit;
