import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { ConnectError } from '../src/db/client.js';
import { isResourceShortage, stopsWrites } from '../src/db/sqlstate.js';
import { translate } from '../src/db/transaction.js';
import { TryAgainError } from '../src/core/errors.js';
import { maskUnexpected } from '../src/http/plugins/error-contract.js';
import { captureLog } from './support/log-capture.js';

/** Every code of classes 53 and 58 in PostgreSQL's Appendix A (17), and the classes' own. */
const CLASS_53_AND_58 = ['53000', '53100', '53200', '53300', '53400', '58000', '58030', '58P01', '58P02', '58P03'];

/** An error as pg reports one: the server's message (which names its files) and the SQLSTATE. */
const pgError = (code: string) =>
  Object.assign(new Error(`could not extend file "base/16384/16500": No space left on device (${code})`), { code });

const settings = { statementTimeoutMs: 5_000 };

describe('a database short of resources (SQLSTATE classes 53 and 58)', () => {
  it.each(CLASS_53_AND_58)('%s is TRY_AGAIN with the resource named and the database message kept out', (code) => {
    expect(isResourceShortage(pgError(code))).toBe(true);
    const translated = translate(pgError(code), 1, settings);
    expect(translated).toBeInstanceOf(TryAgainError);
    const error = translated as TryAgainError;
    expect(error.extensions).toMatchObject({ code: 'TRY_AGAIN', reason: code, attempts: 1 });
    expect(error.retryAfterMs).toBeGreaterThanOrEqual(1_000);
    expect(error.message).toMatch(new RegExp(`^The database .+ \\(${code}\\); nothing was written: resend the request$`));
    expect(error.message).not.toMatch(/base\/16384|No space left/);
  });

  it('names the disk, the memory and the connection slots by their own words', () => {
    const message = (code: string) => (translate(pgError(code), 1, settings) as TryAgainError).message;
    expect(message('53100')).toMatch(/out of disk space/);
    expect(message('53200')).toMatch(/out of memory/);
    expect(message('53300')).toMatch(/no connection slot left \(max_connections\)/);
    expect(message('58030')).toMatch(/I\/O error/);
  });

  it('a new connection refused for want of slots (53300) is TRY_AGAIN naming max_connections, not a failed host', () => {
    const refused = new ConnectError([{ host: 'db:5432', kind: 'error', message: 'sorry, too many clients already', sqlState: '53300' }]);
    expect(translate(refused, 1, settings)).toMatchObject({ reason: '53300', message: expect.stringMatching(/max_connections/) });
  });

  it('only 53300 leaves the writes of connections already open working', () => {
    expect(CLASS_53_AND_58.filter((code) => !stopsWrites(code))).toEqual(['53300']);
  });

  it.each(CLASS_53_AND_58)('%s met outside the runners is TRY_AGAIN at the edge, never INTERNAL_SERVER_ERROR', (code) => {
    const { lines, logger } = captureLog();
    const thrown = new GraphQLError('could not extend file', { originalError: pgError(code), path: ['createContractDocument'] });
    const masked = maskUnexpected(logger)(thrown);
    expect(masked.extensions).toMatchObject({ code: 'TRY_AGAIN', reason: code });
    expect(masked.message).not.toMatch(/could not extend/);
    expect(masked.path).toEqual(['createContractDocument']);
    expect(lines.filter((line) => line['msg'] === 'unexpected error, masked for the client')).toEqual([]);
  });

  it('other database errors stay what they were: a bug is still INTERNAL_SERVER_ERROR', () => {
    const bug = pgError('42P01');
    expect(isResourceShortage(bug)).toBe(false);
    expect(translate(bug, 1, settings)).toBe(bug);
    expect(maskUnexpected(captureLog().logger)(bug).extensions['code']).toBe('INTERNAL_SERVER_ERROR');
  });
});
