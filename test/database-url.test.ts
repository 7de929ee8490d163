import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { describeTarget, parseDatabaseUrl } from '../src/core/database-url.js';

describe('DATABASE_URL in libpq forms', () => {
  it('splits a multi-host URL into one single-host URL per host, in order, keeping user, database and parameters', () => {
    const target = parseDatabaseUrl(
      'postgres://app:s%40cret@db1.internal:5433,10.0.0.2,[fd00::7]:6432/shop?sslmode=require&target_session_attrs=read-write',
    );
    expect(target.target).toBe('read-write');
    expect(target.database).toBe('shop');
    expect(target.hosts.map(({ host, port }) => ({ host, port }))).toEqual([
      { host: 'db1.internal', port: 5433 },
      { host: '10.0.0.2', port: 5432 },
      { host: 'fd00::7', port: 6432 },
    ]);
    expect(target.hosts.map((host) => host.url)).toEqual([
      'postgres://app:s%40cret@db1.internal:5433/shop?sslmode=require',
      'postgres://app:s%40cret@10.0.0.2:5432/shop?sslmode=require',
      'postgres://app:s%40cret@[fd00::7]:6432/shop?sslmode=require',
    ]);
    expect(describeTarget(target)).toBe('db1.internal:5433,10.0.0.2:5432,[fd00::7]:6432/shop');
  });

  it('a single host stays what it was, and target_session_attrs defaults to any', () => {
    const target = parseDatabaseUrl('postgresql://app@db.internal/app');
    expect(target).toMatchObject({ target: 'any', database: 'app', hosts: [{ host: 'db.internal', port: 5432 }] });
    expect(target.hosts[0]!.url).toBe('postgresql://app@db.internal:5432/app');
  });

  it('refuses, by name, what a server that writes cannot use', () => {
    const refusal = (url: string) => {
      try {
        loadConfig({ DATABASE_URL: url });
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(refusal('postgres://app@db1,db2/app?target_session_attrs=standby')).toMatch(
      /^DATABASE_URL: target_session_attrs=standby is not supported: this server writes/,
    );
    expect(refusal('postgres://app@db1:5432,db2:99999/app')).toMatch(/^DATABASE_URL: "db2:99999" has a port outside 1 to 65535/);
    expect(refusal('postgres://app@db1,,db2/app')).toMatch(/^DATABASE_URL: an empty host/);
    expect(refusal('postgres://app@fd00::7:5432/app')).toMatch(/^DATABASE_URL: .*IPv6 address as \[addr\]:port/);
    expect(refusal('mysql://app@db/app')).toMatch(/^DATABASE_URL: expected a postgres:\/\/ URL, got the scheme "mysql:"/);
    expect(refusal('postgres://app:pw@db1,db2/app?target_session_attrs=read-write')).toBeNull();
  });
});
