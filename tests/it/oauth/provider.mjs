// A real OAuth 2.1 authorization server (oidc-provider, OpenID-certified) and an MCP resource it
// protects, in one process on 127.0.0.1, for tests/it/oauth.rs.
//
// - The authorization server: dynamic client registration, PKCE required, refresh tokens issued
//   and rotated, resource indicators (RFC 8707) for the MCP endpoint, the built-in login and
//   consent forms (devInteractions). Access tokens live ACCESS_TTL seconds (default 60).
// - The resource, `/mcp`: a minimal streamable-HTTP MCP server (JSON responses) with one tool,
//   `whoami`, that answers 401 + WWW-Authenticate without a valid bearer token for this
//   resource, and its protected resource metadata (RFC 9728).
// - `/stats`: how many tokens were issued by each grant (the test checks refreshes).
//
// OIDC_PROVIDER is the installed package's directory (tools/node_modules/oidc-provider).
// Prints one JSON line {"issuer", "mcp"} on stdout when ready.
import http from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const { default: Provider } = await import(pathToFileURL(join(process.env.OIDC_PROVIDER, 'lib/index.js')).href);

const ttl = Number(process.env.ACCESS_TTL || 60);
const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const resource = `${origin}/mcp`;
const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`;
const SCOPE = 'mcp:tools';

const provider = new Provider(origin, {
  clients: [],
  clientDefaults: {
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  },
  cookies: { keys: ['car-test-cookie-key'] },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) {
          throw new Error(`unknown resource ${indicator}`);
        }
        return { scope: SCOPE, audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
  scopes: ['openid', 'offline_access', SCOPE],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: ttl, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
});
provider.proxy = false;

const grants = {};
provider.on('grant.success', (ctx) => {
  const type = ctx.oidc.params.grant_type;
  grants[type] = (grants[type] || 0) + 1;
});

const tools = [{
  name: 'whoami',
  description: 'Says who the token belongs to',
  inputSchema: { type: 'object', properties: {} },
  annotations: { readOnlyHint: true },
}];

async function authorized(req) {
  const header = req.headers.authorization || '';
  const match = /^Bearer (.+)$/.exec(header);
  if (!match) return null;
  const token = await provider.AccessToken.find(match[1]);
  if (!token || token.isExpired || token.aud !== resource) return null;
  return token;
}

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function mcp(req, res) {
  const token = await authorized(req);
  if (!token) {
    res.writeHead(401, {
      'www-authenticate': `Bearer resource_metadata="${metadataUrl}", scope="${SCOPE}"`,
      'content-type': 'application/json',
    });
    res.end(JSON.stringify({ error: 'invalid_token' }));
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(req.method === 'DELETE' ? 200 : 405);
    res.end();
    return;
  }
  let body = '';
  for await (const chunk of req) body += chunk;
  const message = JSON.parse(body);
  if (message.id === undefined) {
    res.writeHead(202);
    res.end();
    return;
  }
  const reply = (result) => json(res, 200, { jsonrpc: '2.0', id: message.id, result }, { 'mcp-session-id': 'session-1' });
  switch (message.method) {
    case 'initialize':
      return reply({
        protocolVersion: message.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: 'oidc-protected', version: '1.0.0' },
      });
    case 'tools/list':
      return reply({ tools });
    case 'tools/call':
      return reply({ content: [{ type: 'text', text: `hello ${token.accountId}` }] });
    case 'ping':
      return reply({});
    default:
      return json(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'method not found' } });
  }
}

const callback = provider.callback();
server.on('request', (req, res) => {
  const path = req.url.split('?')[0];
  if (path === '/mcp') {
    mcp(req, res).catch((err) => json(res, 500, { error: String(err) }));
  } else if (path === '/.well-known/oauth-protected-resource/mcp' || path === '/.well-known/oauth-protected-resource') {
    json(res, 200, {
      resource,
      authorization_servers: [origin],
      scopes_supported: [SCOPE],
      bearer_methods_supported: ['header'],
    });
  } else if (path === '/stats') {
    json(res, 200, { grants });
  } else {
    callback(req, res);
  }
});

process.stdout.write(`${JSON.stringify({ issuer: origin, mcp: resource })}\n`);
