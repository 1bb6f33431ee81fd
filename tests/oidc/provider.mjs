// A real OpenID provider for the sign-in tests: npm's oidc-provider (under var/node), configured
// from the JSON file named on the command line (tests/oidc/__init__.py writes it).
//
//   node tests/oidc/provider.mjs config.json
//
// Config: port (0 = any free one), client {client_id, client_secret, redirect_uris,
// post_logout_redirect_uris, token_endpoint_auth_method}, require_pkce, jwk (the private RSA
// signing key, with kid), accounts [{sub, email, email_verified, name, preferred_username,
// password}], cookie_key. Prints "oidc-provider ready at <issuer>" once it serves.
//
// Its own login page checks an account's login (preferred_username or email) and password, so a
// test signs in as a given user; consent is granted without a page for the one test client.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const configPath = process.argv[2];
if (!configPath) {
  console.error('usage: node provider.mjs <config.json>');
  process.exit(2);
}
const config = JSON.parse(readFileSync(configPath, 'utf8'));

// An ES module import ignores NODE_PATH: resolve the package from var/node explicitly.
const nodeDir = process.env.OIDC_NODE_DIR ?? fileURLToPath(new URL('../../var/node/', import.meta.url));
const requireFromNodeDir = createRequire(pathToFileURL(`${nodeDir}/package.json`));
const { default: Provider } = await import(
  pathToFileURL(requireFromNodeDir.resolve('oidc-provider')).href
);

const accounts = new Map(config.accounts.map((account) => [account.sub, account]));
const CLAIMS = ['sub', 'email', 'email_verified', 'name', 'preferred_username'];

function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// No external stylesheet or font: the tests' browser is on a closed network, and a failed fetch
// would show up as a console error in tests that watch for them.
function page(title, body) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font-family:sans-serif;max-width:22rem;margin:3rem auto;padding:0 1rem}
label,input,button{display:block;width:100%;margin:.4rem 0}.error{color:#b00020}</style>
</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

function loginPage(uid, clientId, error) {
  return page('Sign in', `<p>to continue to <span id="client">${escapeHtml(clientId)}</span></p>
${error ? `<p class="error" id="login-error">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login" autocomplete="off">
<label for="login">Username or email</label><input id="login" name="login" required autofocus>
<label for="password">Password</label><input id="password" name="password" type="password" required>
<button id="sign-in" type="submit">Sign in</button></form>`);
}

const server = createServer();
await new Promise((resolve) => { server.listen(config.port ?? 0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    ...config.client,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    id_token_signed_response_alg: 'RS256',
  }],
  // Discovery lists only the client's own method: an RP that picks one from discovery
  // (allauth does) then picks the method this client is registered with.
  clientAuthMethods: [config.client.token_endpoint_auth_method],
  jwks: { keys: [config.jwk] },
  enabledJWA: { idTokenSigningAlgValues: ['RS256'] },
  pkce: { methods: ['S256'], required: () => config.require_pkce },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
  },
  // The ID token carries the profile and email claims too, not only the UserInfo endpoint,
  // so an RP that skips UserInfo still gets them.
  conformIdTokenClaims: false,
  async findAccount(ctx, sub) {
    const account = accounts.get(sub);
    if (!account) return undefined;
    const claims = Object.fromEntries(CLAIMS.filter((k) => k in account).map((k) => [k, account[k]]));
    return { accountId: sub, claims: async () => claims };
  },
  // The test client is first-party: grant what it asks for instead of showing a consent page.
  async loadExistingGrant(ctx) {
    const { client, account } = ctx.oidc;
    const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: account.accountId });
    grant.addOIDCScope([...ctx.oidc.requestParamOIDCScopes].join(' '));
    grant.addOIDCClaims([...ctx.oidc.requestParamClaims]);
    await grant.save();
    return grant;
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out', `<p>Sign out of ${escapeHtml(ctx.host)}?</p>${form}
<button id="logout-yes" type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button id="logout-no" type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p id="signed-out">You are signed out.</p>');
      },
    },
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', Object.entries(out)
      .map(([k, v]) => `<p class="error"><strong>${escapeHtml(k)}</strong>: ${escapeHtml(v)}</p>`)
      .join(''));
  },
  // Signed cookies; a fresh key per start (no state survives a restart anyway).
  cookies: { keys: [config.cookie_key] },
});
// Refusals land in the process log, which the Python fixture shows when a test fails.
for (const event of ['server_error', 'authorization.error', 'grant.error', 'end_session.error']) {
  provider.on(event, (ctx, error) => {
    console.error(`${event}: ${error.message} ${error.error_description ?? ''}`);
  });
}
const handleOidc = provider.callback();

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

function findByLogin(login) {
  const wanted = login.trim().toLowerCase();
  return config.accounts.find(
    (a) => a.preferred_username?.toLowerCase() === wanted || a.email?.toLowerCase() === wanted,
  );
}

function send(res, status, html) {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(html);
}

async function route(req, res) {
  const match = /^\/interaction\/([\w-]+)(\/login)?$/.exec(new URL(req.url, 'http://x').pathname);
  if (!match) {
    if (req.url === '/favicon.ico') { res.writeHead(204).end(); return; }
    handleOidc(req, res);
    return;
  }
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== match[1]) { send(res, 400, page('Error', '<p>Unknown interaction.</p>')); return; }
    if (details.prompt.name !== 'login') {
      // Consent is granted by loadExistingGrant; any other prompt just resumes.
      await provider.interactionFinished(req, res, {}, { mergeWithLastSubmission: true });
      return;
    }
    if (req.method === 'GET' && !match[2]) {
      send(res, 200, loginPage(details.uid, details.params.client_id));
      return;
    }
    if (req.method !== 'POST' || !match[2]) { send(res, 405, page('Error', '<p>Method not allowed.</p>')); return; }
    const form = await readForm(req);
    const account = findByLogin(form.get('login') ?? '');
    if (!account || account.password !== form.get('password')) {
      send(res, 200, loginPage(details.uid, details.params.client_id, 'Wrong username or password.'));
      return;
    }
    await provider.interactionFinished(
      req, res, { login: { accountId: account.sub } }, { mergeWithLastSubmission: false },
    );
  } catch (error) {
    console.error(`interaction: ${error.message}`);
    send(res, 400, page('Error', `<p class="error">${escapeHtml(error.message)}</p>`));
  }
}

server.on('request', (req, res) => { route(req, res); });
console.log(`oidc-provider ready at ${issuer}`);
