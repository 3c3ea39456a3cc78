"""An MCP server protected by OAuth, written with the official Python SDK (mcp 2.x: MCPServer
with its own authorization server): dynamic client registration, PKCE, the `resource`
parameter, refresh tokens. Every authorization is approved at once (the redirect carries the
code), and access tokens live one second, so that every later request needs a refresh.
crates/agentloop/tests/mcp_oauth.rs and crates/agentloop-cli/tests/mcp_login.rs start it:
`oauth_server.py PORT [TOKENS_FILE]` (each token issued is appended to TOKENS_FILE, for the
tests to look for where it must not be)."""

import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

ACCESS_SECONDS = 1


class Provider:
    def __init__(self):
        self.clients = {}
        self.codes = {}
        self.access = {}
        self.refresh = {}
        self.issued = []
        self.stats = {"authorizations": 0, "refreshes": 0}

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull):
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        return self.codes.get(authorization_code)

    def _tokens(self, client_id, scopes, resource):
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + ACCESS_SECONDS,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        self.issued += [access, refresh]
        if tokens_file:
            with open(tokens_file, "a") as file:
                file.write(f"{access}\n{refresh}\n")
        return OAuthToken(
            access_token=access,
            expires_in=ACCESS_SECONDS,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        self.stats["authorizations"] += 1
        return self._tokens(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        self.stats["refreshes"] += 1
        return self._tokens(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        access = self.access.get(token)
        if access is None or (access.expires_at and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token):
        self.access.pop(token.token, None)


port = int(sys.argv[1])
tokens_file = sys.argv[2] if len(sys.argv) > 2 else None
base = f"http://127.0.0.1:{port}"
provider = Provider()
server = MCPServer(
    "agentloop-oauth-test",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=base,
        resource_server_url=f"{base}/mcp",
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
        ),
        required_scopes=["mcp"],
    ),
)


@server.tool()
def stats() -> str:
    """How many authorizations and refreshes the server made."""
    return f"authorizations={provider.stats['authorizations']} refreshes={provider.stats['refreshes']}"


@server.tool()
def issued() -> str:
    """Every token the server issued, one per line (for the test to look for in its store)."""
    return "\n".join(provider.issued)


if __name__ == "__main__":
    import anyio

    anyio.run(lambda: server.run_streamable_http_async(port=port))
