import { builder } from '../builder.js';
import { badInput } from '../../core/errors.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireText } from '../validate.js';
import { cleanupEntities, type CleanupResult } from '../../features/huddles/cleanup.js';
import {
  cleanupPass,
  huddleEntities,
  findActiveSession,
  type HuddleResult,
  type HuddleSession,
  type Participant,
} from '../../features/huddles/service.js';

const OBJECTIVE_ID_MAX_LENGTH = 128;

const ParticipantType = builder.objectRef<Participant>('HuddleParticipant').implement({
  fields: (t) => ({
    memberId: t.exposeID('memberId'),
    joinedAt: t.expose('joinedAt', { type: 'DateTime' }),
    lastHeartbeatAt: t.expose('lastHeartbeatAt', { type: 'DateTime' }),
  }),
});

const HuddleSessionType = builder.objectRef<HuddleSession>('HuddleSession').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    objectiveId: t.exposeID('objectiveId'),
    startedAt: t.expose('startedAt', { type: 'DateTime' }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true }),
    participants: t.expose('participants', { type: [ParticipantType], description: 'Members who have not left.' }),
  }),
});

const HuddleStatus = builder.enumType('HuddleStatus', {
  values: {
    JOINED: { description: 'The member is now in the session (a new session when none was active).' },
    ALREADY_JOINED: { description: 'The member was already in the session; nothing changed.' },
    HEARTBEAT_RECORDED: { description: "The member's heartbeat was recorded." },
    LEFT: { description: 'The member left; the session has ended if nobody is left (endedAt is set).' },
    NOT_IN_HUDDLE: {
      description:
        'The member is not in an active session of this objective (never joined, left, or removed as stale); nothing changed. Join again.',
    },
  } as const,
});

const HuddlePayload = builder.objectRef<HuddleResult>('HuddlePayload').implement({
  fields: (t) => ({
    status: t.field({ type: HuddleStatus, resolve: (r) => r.status }),
    session: t.expose('session', {
      type: HuddleSessionType,
      nullable: true,
      description: 'The session the operation acted on, or the active one; null when the objective has none.',
    }),
  }),
});

const HuddleInput = builder.inputType('HuddleInput', {
  fields: (t) => ({ objectiveId: t.id({ description: `1 to ${OBJECTIVE_ID_MAX_LENGTH} characters.` }) }),
});

type MemberOperation = 'joinHuddle' | 'heartbeatHuddle' | 'leaveHuddle';

function huddleMutation(name: MemberOperation, description: string) {
  defineMutation(name, {
    access: { member: true },
    description,
    input: HuddleInput,
    type: HuddlePayload,
    prepare: (input) => requireText(input.objectiveId, 'objectiveId', OBJECTIVE_ID_MAX_LENGTH),
    call: (objectiveId, { session, services }) => ({
      work: services.huddleOperations[name],
      input: { tenantId: session.tenantId, memberId: session.userId, objectiveId },
      entities: huddleEntities,
    }),
  });
}

huddleMutation(
  'joinHuddle',
  "Puts the session's member into the objective's active huddle, starting one when none is active. Joining again is a no-op.",
);
huddleMutation(
  'heartbeatHuddle',
  "Records that the member is still in the objective's huddle; NOT_IN_HUDDLE (nothing changed) when they are not.",
);
huddleMutation('leaveHuddle', "Takes the member out of the objective's huddle; the last one out ends it.");

const CleanupResultType = builder.objectRef<CleanupResult>('CleanupHuddlesPayload').implement({
  fields: (t) => ({
    participantsRemoved: t.exposeInt('participantsRemoved', { description: 'Members marked as left for a stale heartbeat.' }),
    sessionsEnded: t.exposeInt('sessionsEnded', { description: 'Sessions ended because nobody was left.' }),
  }),
});

defineMutation('cleanupHuddles', {
  access: { tenantAdmin: true, operator: true },
  description:
    "Runs one stale-huddle cleanup pass now (the worker runs one every HUDDLE_CLEANUP_INTERVAL_MS): the tenant's, or every tenant's for the platform operator. Admins only.",
  type: CleanupResultType,
  call: (_none, { session, services }) => ({
    work: cleanupPass,
    input: {
      tenantId: session.tenantId,
      staleAfterMs: services.config.huddles.staleAfterMs,
      batchSize: services.config.huddles.cleanupBatchSize,
    },
    needs: services.huddleOperations,
    entities: cleanupEntities,
  }),
});

builder.queryField('huddle', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: HuddleSessionType,
    nullable: true,
    description: "The objective's active huddle in the session's tenant, or null.",
    args: { objectiveId: t.arg.id() },
    resolve: (_root, { objectiveId }, ctx) => {
      if (objectiveId.length === 0 || objectiveId.length > OBJECTIVE_ID_MAX_LENGTH) {
        throw badInput(`objectiveId must be 1 to ${OBJECTIVE_ID_MAX_LENGTH} characters`, 'objectiveId');
      }
      return runRead(ctx, (trx) => findActiveSession(trx, ctx.session.tenantId, objectiveId));
    },
  }),
);
