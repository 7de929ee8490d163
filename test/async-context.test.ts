import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { asyncSlot } from '../src/core/async-context.js';

/** The async slots share one AsyncLocalStorage: each must still read as a store of its own. */
describe('async slots', () => {
  it('set one slot and leave the others as they are, across awaits', async () => {
    const [first, second] = [asyncSlot<string>(), asyncSlot<number>()];
    await first.run('outer', async () => {
      await second.run(7, async () => {
        await nextTurn();
        expect([first.get(), second.get()]).toEqual(['outer', 7]);
        // Clearing one (as outsideRequestScope clears the request scope) keeps the other.
        await first.run(undefined, async () => {
          await nextTurn();
          expect([first.get(), second.get()]).toEqual([undefined, 7]);
        });
        expect(first.get()).toBe('outer');
      });
      expect(second.get()).toBeUndefined();
    });
    expect(first.get()).toBeUndefined();
  });

  it('never hand one async context the value another set, however their awaits interleave', async () => {
    const slot = asyncSlot<number>();
    const seen = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        slot.run(i, async () => {
          const values: (number | undefined)[] = [];
          for (let step = 0; step < 5; step++) {
            await nextTurn();
            values.push(slot.get());
          }
          return values;
        }),
      ),
    );
    expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => Array(5).fill(i)));
  });
});
