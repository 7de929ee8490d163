/** The URL of `database` on the server `serverUrl` points at (its user, password, host and port kept). */
export function databaseUrl(database: string, serverUrl: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}
