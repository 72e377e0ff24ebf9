// The documented forms of running calls together compile inside a `#[flow_skill]` step as written:
// `ctx.try_all` and `ctx.all` over a closure that borrows the step's data and `ctx`, and
// `ctx.race` over calls of one type and over boxed calls of different types.
#![deny(warnings)]
use radkit::prelude::*;

#[derive(Default)]
struct Fetch;

#[flow_skill(id = "fetch", name = "Fetch")]
impl Fetch {
    #[step(start)]
    async fn fetch(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        let cities = vec!["Lisbon".to_owned(), "Porto".to_owned()];
        let forecasts = ctx
            .try_all(cities.iter().map(|c| ctx.tool("forecast").call::<_, String>(c)))
            .await?;
        let sizes = ctx
            .all(cities.iter().map(|c| ctx.llm("size").run::<u32>(c)))
            .await;
        let (_, fastest) = ctx
            .race([
                ctx.llm("fast").run::<String>(msg.joined_texts()),
                ctx.llm("slow").run::<String>(msg.joined_texts()),
            ])
            .await;
        let (_, either) = ctx
            .race([
                ctx.ask("note", "A note?").map(|r| r.map(|c| c.joined_texts())).boxed(),
                ctx.tool("guess").call::<_, String>(()).boxed(),
            ])
            .await;
        let text = format!("{} {} {} {}", forecasts.join(","), sizes.len(), fastest?, either?);
        ctx.complete(text, vec![])
    }
}

fn main() {}
