import { builder } from '../builder.js';
import type { Session } from '../../features/identity/session.js';

const ViewerType = builder.objectRef<Session>('Viewer').implement({
  description: 'Who the server thinks is calling: handy for checking headers in GraphiQL.',
  fields: (t) => ({
    role: t.exposeString('role'),
    userId: t.exposeString('userId', { nullable: true }),
    tenantId: t.exposeString('tenantId', { nullable: true }),
  }),
});

builder.queryField('viewer', (t) =>
  t.field({
    type: ViewerType,
    nullable: true,
    description: 'The session of this request, or null when anonymous.',
    resolve: (_r, _a, ctx) => ctx.session,
  }),
);
